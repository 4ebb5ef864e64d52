// The io_uring read executor behind file sources (engine-internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "ringsafe/source.hpp"
#include "uring/worker_ring.hpp"

namespace ringsafe::uring {

// The file the executor reads and how.
struct read_target {
    const std::string* path = nullptr;  // for messages
    std::uint64_t size = 0;             // file size at open; ops must lie inside it
    bool direct = false;                // O_DIRECT: round to `align`, bounce edges
    std::uint32_t align = 1;            // file offset/length alignment (direct)
    std::uint32_t mem_align = 1;        // buffer address alignment (direct)
    std::uint64_t chunk_size = 4u << 20;  // split at multiples of this file offset
    bool async_punt = false;            // IOSQE_ASYNC on every read
    // Sequential streams (cold buffered reads): each ring reads its own
    // contiguous share in file order with at most `stream_depth` reads in
    // flight (see chunk_queue); otherwise rings share one cursor. With one
    // read in flight per stream the kernel's readahead (which keeps the next
    // window in flight itself) reads into large folios every time: 7.7k
    // page-cache insertions for 538 MB with two streams, against 9.8k-34k
    // (varying run to run) with two reads in flight and 131k (all 4 KiB)
    // with a shared cursor or io-wq reads.
    bool streams = false;
    unsigned stream_depth = 1;
};

// The worker rings an execution may use: get(i) returns ring i (0 <= i <
// count), taking it on first use, on the calling thread, in order of i. get(0)
// may throw (the execution fails); a later ring that cannot be had just means
// fewer workers.
struct ring_set {
    std::size_t count = 1;
    unsigned depth = 32;  // reads each ring keeps in flight
    std::function<worker_ring&(std::size_t)> get;
};

// Plans of fewer bytes than this run inline: on the calling thread's ring
// alone (no worker thread started) and without IOSQE_ASYNC (an io-wq hop
// doubles the cost of a 4 KiB read, and the first punted read of a new
// process waits milliseconds for an io-wq worker to start; bench/README.md,
// "Rings and io-wq").
constexpr std::uint64_t inline_plan_bytes = 1u << 20;
// Total bytes of the ops (saturating).
std::uint64_t plan_bytes(std::span<const read_op> ops) noexcept;

// Reads every op into its dst using rings from `set` (one thread per ring:
// the calling thread runs ring 0, pooled threads the others, see
// worker_threads.hpp), no more than the plan can use: hot reads
// punted to io-wq run on ring 0 alone (io-wq spreads the copies), others on
// up to one ring per chunk, each starting on its own share of the bytes; a
// plan under inline_plan_bytes runs on ring 0 without IOSQE_ASYNC or streams. Validates all ops before any I/O (InvalidArgument
// for a null dst or a range past target.size). On the first failure it stops
// submitting, waits for all in-flight reads, then throws: system_category for
// -errno results, Truncated when the file ended early, Cancelled when
// ctl.cancel was set; messages name the path, the file offset and
// ctl.describe(tag).
void execute_reads(const ring_set& set, const read_target& target, std::span<const read_op> ops,
                   const io_control& ctl);

}  // namespace ringsafe::uring
