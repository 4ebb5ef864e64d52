// Local files as byte sources, read with io_uring.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ringsafe/source.hpp"

namespace ringsafe {

// How local files are read. Defaults suit a page-cache-hot NVMe/virtio file.
struct file_options {
    unsigned queue_depth = 32;                // reads in flight per ring
    std::uint64_t chunk_size = 4u << 20;      // large ranges are split into chunks of this size
    unsigned threads = 2;                     // worker rings/threads (page-cache copies run on them)
    bool direct = false;                      // O_DIRECT: bypass the page cache
    bool register_buffers = true;             // register bounce buffers/files with the ring (O_DIRECT)
    std::uint64_t prefetch = 256u << 10;      // bytes read speculatively at open (the header)
};

// Opens a local file; reads its first min(prefetch, size) bytes with one read.
// Throws ringsafe::error naming the path (system_category for errno failures).
std::unique_ptr<source> open_file(const std::string& path, const file_options& opts = {});

}  // namespace ringsafe
