// The process-wide cache of freed destination buffers (see buffer_cache.hpp).
#include "memory/buffer_cache.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace ringsafe::memory {

namespace {

using clock = std::chrono::steady_clock;

struct entry {
    host_buffer buffer;
    page_kind pages;
};

std::uint64_t default_limit() {
    if (const char* v = std::getenv("RINGSAFE_ARENA_CACHE")) {
        char* end = nullptr;
        const unsigned long long n = std::strtoull(v, &end, 10);
        if (end != v) return n;
    }
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const std::uint64_t ram = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * page : 0;
    return std::min<std::uint64_t>(ram / 8, 4ull << 30);
}

// Leaked on purpose (used from destructors that may run at exit). A forked
// child gets a fresh one: the parent's threads and lock holders are not there.
struct cache {
    std::mutex m;
    std::condition_variable cv;
    std::vector<entry> entries;
    std::uint64_t bytes = 0;
    std::uint64_t limit = default_limit();
    double idle_seconds = 2.0;
    clock::time_point last_use = clock::now();
    bool sweeper = false;
    buffer_cache_stats stats;
};

cache* the_cache = nullptr;
std::once_flag init_once;

void after_fork_in_child() {
    // The parent's buffers are copies here that nobody references; leaving
    // them mapped would double the child's footprint until it exits.
    cache* old = the_cache;
    the_cache = new cache;
    the_cache->limit = old->limit;
    the_cache->idle_seconds = old->idle_seconds;
    for (auto& e : old->entries) {
        host_buffer drop = std::move(e.buffer);
    }
}

cache& get() {
    std::call_once(init_once, [] {
        the_cache = new cache;
        // prepare: take the lock so that no other thread holds it across fork().
        pthread_atfork([] { the_cache->m.lock(); }, [] { the_cache->m.unlock(); },
                       [] {
                           the_cache->m.unlock();
                           after_fork_in_child();
                       });
    });
    return *the_cache;
}

std::uint64_t capacity(const host_buffer& b) { return b.size(); }

// Frees everything idle for idle_seconds; runs while anything is cached.
void sweep() {
    cache& c = get();
    std::unique_lock lk(c.m);
    while (!c.entries.empty()) {
        const auto idle = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(c.idle_seconds));
        if (clock::now() - c.last_use >= idle) {
            std::vector<entry> drop = std::move(c.entries);
            c.entries.clear();
            c.stats.released += c.bytes;
            c.bytes = 0;
            lk.unlock();
            drop.clear();  // munmap outside the lock
            lk.lock();
            continue;
        }
        c.cv.wait_until(lk, c.last_use + idle);
    }
    c.sweeper = false;
}

}  // namespace

host_buffer take_buffer(std::size_t size, page_kind pages) {
    cache& c = get();
    {
        std::lock_guard lk(c.m);
        c.last_use = clock::now();
        // The smallest cached buffer that fits and is not more than 4/3 of the request.
        auto best = c.entries.end();
        for (auto it = c.entries.begin(); it != c.entries.end(); ++it) {
            const std::uint64_t cap = capacity(it->buffer);
            if (it->pages != pages || cap < size || cap * 3 > static_cast<std::uint64_t>(size) * 4) continue;
            if (best == c.entries.end() || cap < capacity(best->buffer)) best = it;
        }
        if (best != c.entries.end() && size > 0) {
            host_buffer b = std::move(best->buffer);
            c.bytes -= capacity(b);
            c.entries.erase(best);
            ++c.stats.hits;
            return b;
        }
        ++c.stats.misses;
    }
    return host_buffer(size, buffer_options{pages, false});
}

void give_buffer(host_buffer&& buffer, page_kind pages) noexcept {
    host_buffer b = std::move(buffer);
    if (b.size() == 0) return;
    cache& c = get();
    std::unique_lock lk(c.m);
    c.last_use = clock::now();
    if (c.bytes + capacity(b) > c.limit) {
        c.stats.released += capacity(b);
        lk.unlock();
        return;  // b is freed here
    }
    try {
        c.entries.push_back({std::move(b), pages});
    } catch (const std::bad_alloc&) {
        return;
    }
    c.bytes += capacity(c.entries.back().buffer);
    if (!c.sweeper) {
        try {
            std::thread(sweep).detach();
            c.sweeper = true;
        } catch (...) {  // no thread: nothing returns the cache when idle; keep none
            std::vector<entry> drop = std::move(c.entries);
            c.entries.clear();
            c.stats.released += c.bytes;
            c.bytes = 0;
            lk.unlock();
            return;
        }
    }
    c.cv.notify_all();
}

void trim_buffer_cache() noexcept {
    cache& c = get();
    std::vector<entry> drop;
    {
        std::lock_guard lk(c.m);
        drop = std::move(c.entries);
        c.entries.clear();
        c.stats.released += c.bytes;
        c.bytes = 0;
        c.cv.notify_all();
    }
}

void set_buffer_cache_limit(std::uint64_t bytes) noexcept {
    cache& c = get();
    std::vector<entry> drop;  // freed after the lock is released
    {
        std::lock_guard lk(c.m);
        c.limit = bytes;
        // Only what no longer fits goes back to the kernel, largest buffers
        // first: sorted by size, the tail is cut off.
        std::sort(c.entries.begin(), c.entries.end(),
                  [](const entry& a, const entry& b) { return capacity(a.buffer) < capacity(b.buffer); });
        auto keep = c.entries.end();
        while (c.bytes > c.limit && keep != c.entries.begin()) {
            --keep;
            c.bytes -= capacity(keep->buffer);
            c.stats.released += capacity(keep->buffer);
        }
        try {
            drop.assign(std::make_move_iterator(keep), std::make_move_iterator(c.entries.end()));
        } catch (const std::bad_alloc&) {  // no room to move them out: they are freed under the lock
        }
        c.entries.erase(keep, c.entries.end());
    }
}

void set_buffer_cache_idle_seconds(double seconds) noexcept {
    cache& c = get();
    std::lock_guard lk(c.m);
    c.idle_seconds = std::max(0.0, seconds);
    c.cv.notify_all();
}

std::uint64_t buffer_cache_limit() noexcept {
    std::lock_guard lk(get().m);
    return get().limit;
}

double buffer_cache_idle_seconds() noexcept {
    std::lock_guard lk(get().m);
    return get().idle_seconds;
}

buffer_cache_stats buffer_cache_statistics() noexcept {
    cache& c = get();
    std::lock_guard lk(c.m);
    buffer_cache_stats s = c.stats;
    s.cached_bytes = c.bytes;
    s.buffers = c.entries.size();
    return s;
}

}  // namespace ringsafe::memory
