// The io_uring read executor behind file sources (engine-internal).
#pragma once

#include <cstdint>
#include <memory>
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
};

// Reads every op into its dst using `rings` (one thread per ring; the calling
// thread runs rings[0]). Validates all ops before any I/O (InvalidArgument
// for a null dst or a range past target.size). On the first failure it stops
// submitting, waits for all in-flight reads, then throws: system_category for
// -errno results, Truncated when the file ended early, Cancelled when
// ctl.cancel was set; messages name the path, the file offset and
// ctl.describe(tag).
void execute_reads(std::span<const std::unique_ptr<worker_ring>> rings, const read_target& target,
                   std::span<const read_op> ops, const io_control& ctl);

}  // namespace ringsafe::uring
