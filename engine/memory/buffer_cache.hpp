// A process-wide cache of freed destination buffers (engine-internal; the
// Python front end's arenas use it).
//
// Why: fresh anonymous memory costs a page fault and a zeroed page per 4 KiB
// the first time it is written, which on small VMs is slower than the read
// that fills it. A process that loads again (a service reloading weights, a
// loop over shards) gets the pages it freed back, already faulted in.
//
// Bounded: at most limit() bytes are kept (RINGSAFE_ARENA_CACHE in the
// environment, bytes, 0 disables; default min(RAM / 8, 4 GiB)), and a
// background thread returns everything to the kernel once the cache has been
// idle for idle_seconds() (default 2). A buffer is reused only for a request
// of at least 3/4 of its size and of the same page kind; its old bytes are
// not cleared (callers overwrite what they read). fork(): the child starts
// with an empty cache.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringsafe/buffer.hpp"

namespace ringsafe::memory {

struct buffer_cache_stats {
    std::uint64_t cached_bytes = 0;  // bytes held now
    std::uint64_t buffers = 0;       // buffers held now
    std::uint64_t hits = 0;          // take() calls served from the cache
    std::uint64_t misses = 0;        // take() calls that allocated
    std::uint64_t released = 0;      // bytes returned to the kernel (over the cap, idle, trim)
};

// A buffer of at least `size` bytes (a cached one when one fits, else fresh
// and not prefaulted). Its data() holds `size` usable bytes; content is stale
// when reused.
host_buffer take_buffer(std::size_t size, page_kind pages);
// Hands a buffer back: kept while the cache stays under its limit, else freed.
void give_buffer(host_buffer&& buffer, page_kind pages) noexcept;
// Frees every cached buffer now.
void trim_buffer_cache() noexcept;
// Limit in bytes (0 disables the cache; what exceeds a new limit is freed,
// largest buffers first) and idle time before release.
void set_buffer_cache_limit(std::uint64_t bytes) noexcept;
void set_buffer_cache_idle_seconds(double seconds) noexcept;
std::uint64_t buffer_cache_limit() noexcept;
double buffer_cache_idle_seconds() noexcept;
buffer_cache_stats buffer_cache_statistics() noexcept;

}  // namespace ringsafe::memory
