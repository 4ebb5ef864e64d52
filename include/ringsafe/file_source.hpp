// Local files as byte sources, read with io_uring.
//
// open_file() returns a ringsafe::source whose execute() runs up to `threads`
// worker rings (one thread each, the calling thread being one of them), each
// keeping up to `queue_depth` reads in flight. Ranges are split into
// `chunk_size` pieces handed out through a shared cursor (or, for cold
// buffered reads, as one sequential stream per ring; see `mode`), so every
// ring stays busy until the last chunk. Short reads are resubmitted for the
// remainder, -EAGAIN/-EINTR are retried, and the first error stops new
// submissions; the in-flight reads are drained before execute() throws, so
// no I/O targets caller memory after it returns.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ringsafe/source.hpp"

namespace ringsafe {

// How local files are read. The defaults suit a page-cache-hot file read into
// huge-page destination memory, and are sound for cold and O_DIRECT reads
// (bench/bench_read compares them with other settings; the README has figures).
struct file_options {
    // Reads in flight per ring. Page-cache copies are CPU-bound, so depth
    // matters mostly for cold and O_DIRECT reads (deeper queues keep the device
    // busy).
    unsigned queue_depth = 32;
    // Ranges larger than this are split. 4 MiB: large enough that per-request
    // cost is negligible, small enough that two rings share work evenly and
    // that the data in flight stays bounded.
    std::uint64_t chunk_size = 4u << 20;
    // Worker rings, one thread each (the calling thread runs one). A buffered
    // read that hits the page cache is copied by the thread that submits it
    // unless async_punt hands it to io-wq, so without async_punt using N cores
    // for copies needs N rings. 0 = one per online CPU. This is the most an
    // execute() uses, and a hot plan punted to io-wq runs on the calling
    // thread's ring alone (its io-wq spreads the copies over the cores). Rings
    // and the threads beyond the caller's come from a process-wide pool: the
    // first ring is held until the source is destroyed, the others and the
    // threads only during the call; then any other source may take them (a
    // fork() child starts with an empty pool).
    // With RINGSAFE_RING_POOL=0 in the environment each source makes its rings
    // on first need and keeps them, and each call starts its own threads.
    unsigned threads = 2;
    // O_DIRECT: bypass the page cache. Ranges are rounded out to the file's
    // DIO alignment (statx STATX_DIOALIGN, else 4096); only the unaligned
    // edges go through small bounce buffers, and the aligned middle lands
    // straight in the caller's buffer when its address is suitably aligned
    // (else it is bounced in bounded pieces). open_file throws when the
    // filesystem refuses O_DIRECT.
    bool direct = false;
    // Register the file (IOSQE_FIXED_FILE) and, for O_DIRECT, the bounce
    // buffers (IORING_OP_READ_FIXED) with each ring.
    bool register_buffers = true;
    // Buffered reads only: mark every read IOSQE_ASYNC so the kernel's io-wq
    // workers perform the page-cache copies, several at once, spread over all
    // cores, so a single ring copies on every core; without it, copying on
    // N cores needs N rings (see `threads`). On by default. Applies to hot
    // plans only: cold ones never punt (see `mode`). Ignored with `direct`:
    // io-wq would issue direct reads one per worker, limiting the depth that
    // `queue_depth` asks for. A plan under 1 MiB in total is always read inline
    // on the calling thread's ring, whatever the mode (the io-wq hop and a
    // worker thread cost more than such a read).
    bool async_punt = true;
    // Buffered reads only: how execute() shapes them, decided per call.
    //  automatic: ask the kernel how much of the planned bytes is in the page
    //    cache (cachestat(2), else a few RWF_NOWAIT one-byte probes); at least
    //    90 % cached -> hot, otherwise cold.
    //  hot: rings share the chunks in any order, IOSQE_ASYNC per async_punt.
    //  cold: no IOSQE_ASYNC; each ring reads its own contiguous share of the
    //    plan in file order with one read in flight, through its own open file
    //    description (a ring that finishes early takes over half of the largest
    //    remaining share). The kernel then sees sequential streams and reads
    //    ahead into large page-cache folios; out-of-order or io-wq reads are
    //    taken for random ones and cached in 4 KiB pages, slower to fill and
    //    to copy from.
    enum class buffered_mode : std::uint8_t { automatic, hot, cold };
    buffered_mode mode = buffered_mode::automatic;
    // Bytes read speculatively at open (the header lives there); prefix().
    // 64 KiB holds most headers (a few hundred tensors); a larger header
    // costs one more read. A larger prefetch makes every open fault in, zero
    // and fill a larger buffer.
    std::uint64_t prefetch = 64u << 10;
};

// Opens a local file, fstat()s its size and reads its first
// min(prefetch, size) bytes with one read (prefix()). Throws ringsafe::error
// naming the path: system_category for errno failures (ENOENT, EACCES, ...),
// InvalidArgument for bad options or when the filesystem refuses O_DIRECT.
// The returned source serializes concurrent execute() calls.
std::unique_ptr<source> open_file(const std::string& path, const file_options& opts = {});

// Whether file sources take their rings and worker threads from the process-wide
// pool: on unless RINGSAFE_RING_POOL=0 was in the environment when first asked.
bool ring_pool_enabled() noexcept;
// Turns the pool on or off for rings and threads taken from now on (sources
// already open keep what they hold).
void set_ring_pool_enabled(bool on) noexcept;

}  // namespace ringsafe
