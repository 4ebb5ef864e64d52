// Byte sources: where a checkpoint's bytes come from (a local file or an HTTP
// object). The reader's planner turns a selection into read_ops; a source's
// executor moves those bytes into caller memory. The planner never knows
// whether bytes come from a disk or a socket.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ringsafe/error.hpp"

namespace ringsafe {

// One byte range to move from a source into caller memory.
struct read_op {
    std::uint64_t offset = 0;  // absolute offset in the source
    std::uint64_t length = 0;  // bytes
    std::byte* dst = nullptr;  // caller memory of `length` bytes; must stay valid until execute() returns
    std::uint32_t tag = 0;     // caller's id for this op (the reader uses the tensor's index)
    // True: a remote source moves it in one request, unsplit (a header read,
    // whose next read depends on what it brings); local sources ignore it.
    bool one_request = false;
};

// Callbacks and cancellation for one execute() call. Callbacks may run on
// executor worker threads, concurrently; they must be cheap and thread-safe.
struct io_control {
    // Called as bytes of ops[op_index] land in its destination (may be called several times per op).
    std::function<void(std::size_t op_index, std::uint64_t bytes)> on_bytes;
    // Names what an op is for, for error messages ("tensor 'w' (bytes 0..64)"); optional.
    std::function<std::string(std::uint32_t tag)> describe;
    // When set to true, execute() stops issuing I/O, waits for what is in flight, and throws Cancelled.
    const std::atomic<bool>* cancel = nullptr;
};

// Hints a source gives the planner.
struct source_hints {
    std::uint64_t preferred_chunk = 4u << 20;  // split ranges larger than this
    std::uint64_t alignment = 1;               // O_DIRECT alignment (1 when unconstrained)
    // A local file's identity (st_dev, st_ino) as opened; 0, 0 for other sources.
    std::uint64_t device = 0, inode = 0;
    // A local file's last modification (st_mtim, in ns) as opened; 0 for other sources.
    std::int64_t mtime_ns = 0;
    // A local file's path as opened (valid while the source lives); empty for other sources.
    std::string_view file{};
};

// A random-access, read-only byte source. Thread-compatible: one execute()
// at a time per source unless the implementation says otherwise.
class source {
public:
    virtual ~source() = default;

    // The path or URL, for messages.
    virtual const std::string& name() const noexcept = 0;
    // Total size in bytes, known from opening.
    virtual std::uint64_t size() const noexcept = 0;
    // The first bytes of the object, fetched by open with one read/request
    // (up to the prefetch size asked for, fewer when the object is smaller).
    virtual std::span<const std::byte> prefix() const noexcept = 0;
    // Reads exactly dst.size() bytes at `offset` (blocking). Throws
    // ringsafe::error (Truncated when the source ends early).
    virtual void read_exact(std::uint64_t offset, std::span<std::byte> dst) = 0;
    // Runs all ops concurrently and returns when every byte has landed. On
    // failure it waits until no I/O targets caller memory any more, then
    // throws the first error, naming the source, offset and (via describe) the tensor.
    virtual void execute(std::span<const read_op> ops, const io_control& ctl) = 0;
    // Chunking/alignment preferences for the planner.
    virtual source_hints hints() const noexcept { return {}; }
};

}  // namespace ringsafe
