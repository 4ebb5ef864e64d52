// How many pages of a file's range the page cache holds, by cachestat(2)
// (engine-internal: mapped_file's populate and uring's page_cache_probe ask it).
#pragma once

#include <cstdint>

namespace ringsafe::file {

// Pages of [offset, +length) of the file open at `fd` that the page cache
// holds, by cachestat(2) (Linux 6.5; its cost grows with the cache's folios,
// not the pages), or -1 when it cannot tell: no cachestat, or not permitted
// (the kernel allows it only to whoever may write the file).
long long cached_pages(int fd, std::uint64_t offset, std::uint64_t length) noexcept;

}  // namespace ringsafe::file
