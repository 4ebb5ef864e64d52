// Copies out of the page cache that leave the CPU caches alone (engine-internal;
// mapped_file::copy_to).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringsafe::file {

// Copies of this size and up use non-temporal stores where the CPU has them.
inline constexpr std::uint64_t stream_min_bytes = 256u << 10;

// Copies n bytes from src (a mapping of the page cache) to dst. From
// stream_min_bytes up with non-temporal stores where the CPU has them (SSE2,
// every x86-64): they skip reading each destination line into the cache
// before overwriting it and leave the cache to the caller's other data, which
// makes them faster than memcpy and pread at these sizes (bench/README.md,
// "Mapped files"). The stores are fenced: visible when this returns.
void stream_copy(std::byte* dst, const std::byte* src, std::uint64_t n);

}  // namespace ringsafe::file
