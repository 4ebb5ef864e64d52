// One shard's part of one async read: the ops the ring executes for it and
// how they went (engine-internal). Touched only in the event ring's serialized context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <system_error>

#include "ringsafe/source.hpp"

namespace ringsafe::uring {

struct file_job {
    int fd = -1;
    const std::string* path = nullptr;            // for messages
    std::uint64_t size = 0;                       // file size at open
    // O_DIRECT (fd opened with it): offsets, lengths and buffer addresses of
    // every read are rounded to these; pieces that cannot land in the
    // caller's buffer go through the slot's aligned bounce buffer.
    bool direct = false;
    std::uint32_t align = 1;
    std::uint32_t mem_align = 1;
    std::span<const read_op> ops;                 // kept alive by the owner
    std::function<std::string(std::uint32_t tag)> describe;  // "tensor 'w' (bytes ..)"
    // Called in the ring's context as bytes of ops[op] land (optional).
    std::function<void(std::size_t op, std::uint64_t bytes)> on_bytes;
    // Called once, in the ring's context, when nothing of this job is in flight any more.
    std::function<void(file_job&)> on_done;

    std::size_t next = 0;       // next op to submit
    unsigned in_flight = 0;     // reads (not cancels) the kernel still owns
    std::uint64_t landed = 0;   // bytes read into caller buffers
    bool stopping = false;      // cancelled or failed: submit nothing more
    bool cancelled = false;
    bool done = false;
    std::error_code ec;         // the first error
    std::string message;        // naming path, offset and tensor
};

}  // namespace ringsafe::uring
