// Replacement global operator new/delete that keep a live-bytes count and a
// resettable peak, and fail one allocation of a thread on demand (see
// allocation_meter.hpp). Sized by malloc_usable_size so that frees need no
// bookkeeping of their own.
#include "allocation_meter.hpp"

#include <malloc.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

std::atomic<std::size_t> g_live{0}, g_peak{0};
// This thread's allocations before the one that fails (allocation_failure); -1: none is to.
thread_local std::ptrdiff_t t_fail_in = -1;
thread_local bool t_failed = false;

void* counted_alloc(std::size_t n) {
    if (t_fail_in >= 0 && t_fail_in-- == 0) {
        t_failed = true;
        throw std::bad_alloc();
    }
    void* p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    std::size_t live = g_live.fetch_add(malloc_usable_size(p)) + malloc_usable_size(p);
    std::size_t peak = g_peak.load();
    while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
    }
    return p;
}

void counted_free(void* p) noexcept {
    if (!p) return;
    g_live.fetch_sub(malloc_usable_size(p));
    std::free(p);
}

}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
    try {
        return counted_alloc(n);
    } catch (const std::bad_alloc&) {
        return nullptr;
    }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }

namespace ringsafe::test {

allocation_meter::allocation_meter() : start_(g_live.load()) { g_peak.store(start_); }

std::size_t allocation_meter::peak() const {
    std::size_t p = g_peak.load();
    return p > start_ ? p - start_ : 0;
}

allocation_failure::allocation_failure(std::size_t n) {
    t_fail_in = static_cast<std::ptrdiff_t>(n);
    t_failed = false;
}

allocation_failure::~allocation_failure() { t_fail_in = -1; }

bool allocation_failure::happened() const { return t_failed; }

}  // namespace ringsafe::test
