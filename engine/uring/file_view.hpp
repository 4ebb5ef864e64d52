// Engine-internal: what another executor (engine/asio) needs to read a file
// source with its own ring. Not part of the public API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ringsafe/source.hpp"

namespace ringsafe::uring {

// A file source's buffered descriptor. Valid while the source lives; the
// descriptor stays owned by the source (never close it).
struct file_view {
    int fd = -1;               // opened O_RDONLY (page cache), even when `direct`
    std::uint64_t size = 0;    // file size at open
    const std::string* path = nullptr;
    bool direct = false;       // the source was opened for O_DIRECT reads
    int direct_fd = -1;        // when `direct`: the O_DIRECT descriptor (owned by the source)
    std::uint32_t align = 1;   // when `direct`: file offset/length alignment
    std::uint32_t mem_align = 1;  // when `direct`: buffer address alignment
};

// The view of `src` when it is a file source made by open_file(), else nullopt.
std::optional<file_view> view_file(const source& src) noexcept;

}  // namespace ringsafe::uring
