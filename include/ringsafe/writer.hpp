// Writing safetensors files in one pass, and never leaving a broken file.
//
// Three ways to write:
//  * writer (streaming): tensors arrive one by one, in any number, of sizes
//    not known in advance. Header space is reserved at the start of the file;
//    data is written sequentially behind it with io_uring (several writes in
//    flight, O_DIRECT where the filesystem allows); finish() writes the header
//    into the reservation, padded with spaces to exactly its size.
//  * declared_writer: every (name, dtype, shape) is declared up front, so the
//    header is exact (byte-for-byte the reference writer's for the same order)
//    and tensor bytes may arrive in any order, from several threads, at their
//    known offsets; in declared order it can also write to a pipe or stdout.
//  * writer::open_append: adds tensors at the end of an existing file whose
//    header padding still has room, rewriting the header in place.
//
// Publishing: new files are written to a temporary beside the target and
// renamed into place only by a successful finish(). An exception, abandon(),
// destruction without finish(), a full disk or an I/O error leave nothing at
// the target path and remove the temporary; errors name the tensor and offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringsafe/dtype.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/header.hpp"
#include "ringsafe/plan.hpp"

namespace ringsafe {

namespace detail {
struct writer_access;  // engine-internal (the async writer drives the writer's engine)
}

// How a writer writes. The defaults suit large checkpoints on a local disk.
struct writer_options {
    // Bytes reserved for the JSON header (N). 0 = computed from the three
    // expectations below (see reservation_for). The data section always starts
    // at a 4096-byte-aligned file offset, so N is rounded up to make it so.
    std::uint64_t reserve_bytes = 0;
    std::uint64_t expected_tensors = 1024;        // used when reserve_bytes == 0
    std::uint64_t expected_name_length = 64;      // bytes per name, on average
    std::uint64_t expected_metadata_bytes = 4096; // bytes of `__metadata__` JSON
    // When the header outgrows the reservation at finish(): false (default)
    // relocates the data once, in the kernel (see writer_stats::relocation);
    // true throws ReservationExceeded and leaves nothing at the target.
    bool strict_reservation = false;
    // Relocation first tries to shift the data in place with
    // fallocate(FALLOC_FL_INSERT_RANGE) (no data copied; ext4/xfs); when that
    // is refused or disabled, it copies the data section with
    // copy_file_range into a new temporary with a larger header.
    bool relocate_in_place = true;
    // O_DIRECT for the data (falls back to buffered I/O where the filesystem
    // refuses it): the data bypasses the page cache instead of waiting there
    // for the final fsync.
    bool direct = true;
    std::uint64_t block_size = 16u << 20;  // bytes per write; a multiple of 4096
    unsigned staging_blocks = 3;           // staging memory = block_size * staging_blocks (48 MiB)
    unsigned queue_depth = 4;              // writes in flight
    bool sync = true;                      // fsync the file before publishing it
    bool sync_dir = true;                  // fsync the directory after the rename
    std::uint64_t max_header_size = default_max_header_size;  // HeaderTooLarge above it
};

// The N a streaming writer reserves for `tensors` tensors with names of about
// `name_length` bytes and `metadata_bytes` of metadata: about
// tensors * (name_length + 160) + metadata_bytes, rounded up so that 8 + N is
// a multiple of 4096.
std::uint64_t reservation_for(std::uint64_t tensors, std::uint64_t name_length,
                              std::uint64_t metadata_bytes) noexcept;

// What a writer did, readable at any time (final after finish()).
struct writer_stats {
    std::uint64_t tensors = 0;          // tensors written (new ones, in append mode)
    std::uint64_t data_bytes = 0;       // tensor bytes written by this writer
    std::uint64_t file_size = 0;        // size of the published file
    std::uint64_t header_reserved = 0;  // N of the published file (the reservation, or larger after relocation)
    std::uint64_t header_json = 0;      // bytes of JSON in the header (the rest is space padding)
    std::uint64_t staged_bytes = 0;     // bytes copied through the staging blocks
    std::uint64_t zero_copy_bytes = 0;  // bytes written straight from caller memory
    std::uint64_t staging_peak = 0;     // staging memory allocated (bytes)
    bool direct = false;                // the data went out with O_DIRECT
    // Reservation overflow handling: "" (none), "insert_range" (data shifted
    // in place, nothing copied) or "copy_file_range" (data copied in the kernel).
    std::string relocation;
    std::uint64_t relocated_bytes = 0;  // bytes moved by copy_file_range
};

// Options for reopening a file to append to it.
struct append_options {
    bool sync = true;  // fdatasync new data before the header rewrite, fsync after it
    // Repair a file left by an append that crashed: drop bytes past the end
    // the header describes, or, when the header itself is torn, go back to the
    // longest valid header prefix whose tensors are all on disk. Without it
    // such a file is refused (MetadataIncompleteBuffer / InvalidHeaderDeserialization).
    bool repair = false;
    // Appended data starts at the old end of file, rarely aligned: buffered I/O.
    std::uint64_t block_size = 8u << 20;
    unsigned staging_blocks = 4;
    unsigned queue_depth = 4;
};

// The streaming writer. Not thread-safe: one thread calls it.
class writer {
public:
    // Starts a new file destined for `path` (a temporary in the same
    // directory until finish()). Throws ringsafe::error naming the path.
    explicit writer(const std::string& path, const writer_options& opts = {});
    // Reopens `path` to add tensors after its data, in place (no temporary:
    // the cost is the new data plus one header rewrite). add()/begin() throw
    // ReservationExceeded, before writing, when the header would outgrow N.
    // finish() writes the data, fdatasyncs, rewrites only the header bytes
    // that change, fsyncs. A crash before the header rewrite leaves the old
    // header + a tail readers refuse (MetadataIncompleteBuffer); a torn
    // rewrite is never valid JSON; opts.repair recovers both (see
    // append_options). abandon()/errors truncate the new data away.
    static writer open_append(const std::string& path, const append_options& opts = {});
    // Abandons the file when finish() did not succeed.
    ~writer();
    writer(writer&&) noexcept;
    writer& operator=(writer&&) noexcept;

    // Adds a whole tensor. `bytes` must hold exactly shape x dtype bytes
    // (TensorInvalidInfo otherwise); they are copied before the call returns.
    // Validation errors (bad name, duplicate, size) leave the writer usable;
    // an I/O error abandons the file and throws naming tensor and offset.
    void add(std::string_view name, dtype t, const std::vector<std::uint64_t>& shape,
             std::span<const std::byte> bytes);
    // Zero-copy add: the writer may write straight from `bytes` and keeps
    // `keep` (which must keep `bytes` alive and unchanged) until those writes
    // have completed, at the latest until finish()/abandon() return.
    void add(std::string_view name, dtype t, const std::vector<std::uint64_t>& shape,
             std::span<const std::byte> bytes, std::shared_ptr<const void> keep);

    // Chunked form for tensors larger than memory: begin(), any number of
    // append() calls whose sizes add up to shape x dtype, then end().
    void begin(std::string_view name, dtype t, const std::vector<std::uint64_t>& shape);
    void append(std::span<const std::byte> bytes);                                 // copied
    void append(std::span<const std::byte> bytes, std::shared_ptr<const void> keep);  // zero-copy, as add()
    void end();  // WriterState naming the tensor when its bytes are incomplete

    // Writes the header (with `metadata` when given; in append mode nullptr
    // keeps the file's metadata), syncs and publishes. After an error nothing
    // is at the target path (new files) or the old file is kept (append).
    void finish(const metadata_map* metadata = nullptr);
    void finish(const metadata_map& metadata) { finish(&metadata); }
    // Drops everything written: removes the temporary (or, in append mode,
    // truncates the new data away). Never throws; idempotent.
    void abandon() noexcept;

    const writer_stats& stats() const noexcept;

    // Zero-copy callers that recycle buffers: holds are released as the
    // writer reaps completions, which it does when it needs a queue slot.
    // writes_in_flight() counts writes not yet reaped; wait_write() blocks
    // until at least one completes and releases its hold (no-op when none;
    // an I/O error abandons the file and throws as add() would).
    unsigned writes_in_flight() const noexcept;
    void wait_write();

    struct impl;

private:
    friend struct detail::writer_access;
    explicit writer(std::unique_ptr<impl> p);
    std::unique_ptr<impl> impl_;
};

// One tensor of a declared_writer.
struct tensor_decl {
    std::string name;
    ringsafe::dtype dtype{};
    std::vector<std::uint64_t> shape;
};

// Options of a declared_writer.
struct declared_options {
    bool sync = true;      // fsync the file before publishing it (files only)
    bool sync_dir = true;  // fsync the directory after the rename (files only)
    std::uint64_t max_header_size = default_max_header_size;
};

// Declared mode: the header is computed from `tensors` (in the given order,
// which is the data order) and `metadata`, padded like the reference writer's.
// Thread-safe: write() may be called from several threads at once; finish()
// and abandon() must not overlap a write() still running. write() is a
// buffered pwrite from the caller's thread (the header's exact size leaves
// the data unaligned for O_DIRECT); write_all() of every tensor at once may
// instead assemble aligned blocks and write them with O_DIRECT.
class declared_writer {
public:
    // A new file destined for `path`; bytes may arrive in any order.
    // Validates every declaration first (names, duplicates, sizes, metadata).
    declared_writer(const std::string& path, std::vector<tensor_decl> tensors,
                    const metadata_map* metadata = nullptr, const declared_options& opts = {});
    // A sequential sink (pipe, socket, stdout, or a file at its current
    // position) that this writer does not own or close: bytes must arrive in
    // declared order, each write starting where the previous one ended
    // (WriterState otherwise). The header is written by the constructor.
    declared_writer(int fd, std::vector<tensor_decl> tensors, const metadata_map* metadata = nullptr,
                    const declared_options& opts = {});
    ~declared_writer();  // abandons unless finished
    declared_writer(const declared_writer&) = delete;
    declared_writer& operator=(const declared_writer&) = delete;

    // Index of a declared tensor (TensorNotFound otherwise).
    std::size_t index(std::string_view name) const;
    // The declared tensors with their data offsets, in data order.
    const std::vector<tensor_entry>& tensors() const noexcept;
    // The N header bytes (without the 8-byte prefix).
    const std::string& header_json() const noexcept;

    // Writes `bytes` at `offset` within tensor `tensor` (returns when written;
    // the caller keeps its buffer). InvalidArgument when the range exceeds
    // the tensor; an I/O error abandons the file and names tensor and offset.
    void write(std::size_t tensor, std::uint64_t offset, std::span<const std::byte> bytes);
    void write(std::string_view name, std::uint64_t offset, std::span<const std::byte> bytes) {
        write(index(name), offset, bytes);
    }
    // Writes every tensor whole, `data[i]` (exactly its size) for tensor i, on
    // `threads` threads (the calling one among them), and returns when all is
    // written: buffered, in 64 MiB pieces with pwrite (one thread is as fast: the
    // kernel takes one file's buffered writes one at a time); with `direct` (a file whose filesystem allows
    // O_DIRECT, else buffered as without it), the whole file, header included,
    // in 8 MiB blocks assembled in aligned staging memory (4 blocks at least
    // in flight) and written with O_DIRECT, so the bytes go to the disk
    // instead of waiting in the page cache for finish()'s fsync.
    // ctl.on_progress gets tensor bytes written, ctl.cancel stops it
    // (Cancelled). Returns whether the data went out with O_DIRECT.
    // InvalidArgument when a size differs; an I/O error abandons the file and
    // names the tensor or offset.
    bool write_all(std::span<const std::span<const std::byte>> data, unsigned threads, bool direct,
                   const read_control& ctl = {});
    // Every tensor must be complete (WriterState naming the first incomplete
    // one, with its missing byte count); then sync and publish.
    void finish();
    void abandon() noexcept;  // removes the temporary; never throws

    struct impl;

private:
    std::unique_ptr<impl> impl_;
};

}  // namespace ringsafe
