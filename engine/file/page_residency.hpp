// What of a mapped file is resident, and making it so (engine-internal; the
// mapped read backend, mapped_file.cpp): samples of mincore, cachestat(2) over
// the file, and faulting pages in by reads or MADV_POPULATE_READ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "ringsafe/mapped_file.hpp"

namespace ringsafe::file {

inline constexpr std::uint64_t page_bytes = 4096;
// The kernel's fault-around: one read fault maps the 16 pages around it.
inline constexpr std::uint64_t fault_around_bytes = 64u << 10;

// Whether [p, p + n) of a mapping looks cached: mincore of five sampled pages
// (first, quarters, last). A full mincore costs about as much as the faults it
// would save; a page the samples missed is still read, by its own fault.
bool looks_resident(std::byte* p, std::uint64_t n);

// One read every `stride` bytes of [p, p + n): page tables for cached pages
// (with stride fault_around_bytes, faster than MADV_POPULATE_READ's
// page-by-page walk, and it scales with threads), or the first access of
// each page just made resident (stride page_bytes).
void touch_pages(const std::byte* p, std::uint64_t n, std::uint64_t stride);

// MADV_POPULATE_READ of [p, p + n) (`offset`: where p is in the file at
// `path`, for messages): false when the kernel lacks it (EINVAL); Truncated
// when the file no longer covers the range (EFAULT).
bool populate_read(std::byte* p, std::uint64_t n, const std::string& path, std::uint64_t offset);

// Pages of `ranges` of the file at `path` that the page cache holds, by
// cachestat(2), or -1 when it cannot tell: no cachestat, not permitted (the
// kernel allows it only to whoever may write the file), or another file
// (not device/inode) at the path now.
long long cached_pages_of(const std::string& path, std::uint64_t device, std::uint64_t inode,
                          std::span<const mapped_range> ranges);

// Whether every page of `ranges` is cached, by cachestat (one call per
// range); false when it cannot tell.
bool all_cached(const std::string& path, std::uint64_t device, std::uint64_t inode,
                std::span<const mapped_range> ranges);

}  // namespace ringsafe::file
