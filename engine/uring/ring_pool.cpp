// The ring pool: leases, the idle list's bounds, owner affinity.
#include "uring/ring_pool.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

#include "uring/pool_state.hpp"

namespace ringsafe::uring {
namespace {

std::atomic<int> enabled{-1};  // -1: the environment not read yet
std::atomic<bool> rings_pooled{false};
std::atomic<std::uint64_t> last_owner{0};

// Idle rings kept per kind (same setup but the file): enough for every thread
// of a few concurrent executions. Rings with bounce buffers (O_DIRECT) hold
// registered, pinned memory (~8 MiB each at the defaults), so those idle in
// the pool are bounded by bytes too, across kinds.
std::size_t max_idle_per_kind() noexcept {
    // hardware_concurrency() reads /sys on every call (glibc): once is enough.
    static const std::size_t n = std::max(16u, 2 * std::thread::hardware_concurrency());
    return n;
}
constexpr std::size_t max_idle_total = 64;
constexpr std::uint64_t max_idle_bounce_bytes = 32u << 20;

bool same_kind(const ring_setup& a, const ring_setup& b) noexcept {
    if (a.depth != b.depth || a.register_file != b.register_file || a.bounce != b.bounce) return false;
    return !a.bounce || (a.register_buffers == b.register_buffers && a.edge_size == b.edge_size &&
                         a.mem_align == b.mem_align && a.big_size == b.big_size);
}

std::uint64_t bounce_bytes(const worker_ring& r) noexcept {
    return r.edge_count() * r.edge_size() + r.big_count() * r.big_size();
}

// Makes room in `s` for `r` (the caller holds s.mutex): moves the oldest idle
// rings that keep it from fitting to `evicted`. False when `r` alone is over
// the bounce bound.
bool make_room(pool_state& s, const worker_ring& r, std::vector<std::unique_ptr<worker_ring>>& evicted) {
    const std::uint64_t bytes = bounce_bytes(r);
    if (bytes > max_idle_bounce_bytes) return false;
    for (;;) {
        std::size_t kind = 0;
        std::uint64_t bounce = bytes;
        for (const idle_ring& i : s.rings) {
            kind += same_kind(i.ring->setup(), r.setup());
            bounce += bounce_bytes(*i.ring);
        }
        const bool kind_full = kind >= max_idle_per_kind();
        if (!kind_full && s.rings.size() < max_idle_total && bounce <= max_idle_bounce_bytes) return true;
        // The oldest of the same kind when the kind is full, else the oldest.
        auto victim = s.rings.begin();
        if (kind_full)
            victim = std::find_if(s.rings.begin(), s.rings.end(),
                                  [&](const idle_ring& i) { return same_kind(i.ring->setup(), r.setup()); });
        evicted.push_back(std::move(victim->ring));
        s.rings.erase(victim);
    }
}

}  // namespace

}  // namespace ringsafe::uring

namespace ringsafe {

bool ring_pool_enabled() noexcept {
    using uring::enabled;
    int v = enabled.load(std::memory_order_relaxed);
    if (v >= 0) return v != 0;
    const char* env = std::getenv("RINGSAFE_RING_POOL");
    int want = env && std::string_view(env) == "0" ? 0 : 1;
    enabled.compare_exchange_strong(v, want, std::memory_order_relaxed);
    return enabled.load(std::memory_order_relaxed) != 0;
}

void set_ring_pool_enabled(bool on) noexcept { uring::enabled.store(on ? 1 : 0, std::memory_order_relaxed); }

}  // namespace ringsafe

namespace ringsafe::uring {

std::uint64_t new_ring_owner() noexcept { return last_owner.fetch_add(1, std::memory_order_relaxed) + 1; }

ring_lease& ring_lease::operator=(ring_lease&& o) noexcept {
    if (this != &o) {
        reset();
        ring_ = std::move(o.ring_);
        owner_ = o.owner_;
        pooled_ = o.pooled_;
    }
    return *this;
}

void ring_lease::reset() noexcept {
    // Declared before the lock: whatever is not pooled is destroyed after it is released.
    std::unique_ptr<worker_ring> r = std::move(ring_);
    std::vector<std::unique_ptr<worker_ring>> evicted;
    if (!r || !pooled_ || r->inherited() || !ring_pool_enabled()) return;
    try {
        pool_state& s = process_pool();
        std::lock_guard lock(s.mutex);
        if (s.closed || !make_room(s, *r, evicted)) return;
        s.rings.push_back({std::move(r), owner_});
    } catch (...) {
        // No memory to pool it: destroyed instead.
    }
}

ring_lease take_ring(const ring_setup& setup, std::uint64_t owner) {
    if (!ring_pool_enabled()) return ring_lease(std::make_unique<worker_ring>(setup), owner, false);
    pool_state& s = process_pool();
    rings_pooled.store(true, std::memory_order_relaxed);
    std::unique_ptr<worker_ring> r;
    bool attached = false;
    {
        std::lock_guard lock(s.mutex);
        if (!s.closed) {
            // The most recently returned first: this owner's ring on this
            // file (still attached), else any ring of the kind.
            auto pick = s.rings.end();
            for (auto it = s.rings.end(); it != s.rings.begin();) {
                --it;
                if (!same_kind(it->ring->setup(), setup)) continue;
                if (it->owner == owner && it->ring->fd() == setup.fd) {
                    pick = it;
                    attached = true;
                    break;
                }
                if (pick == s.rings.end()) pick = it;
            }
            if (pick != s.rings.end()) {
                r = std::move(pick->ring);
                s.rings.erase(pick);
            }
        }
    }
    if (r && (attached || r->attach(setup.fd))) return ring_lease(std::move(r), owner, true);
    r.reset();  // none idle, or the kernel refused the new file: a new ring
    return ring_lease(std::make_unique<worker_ring>(setup), owner, true);
}

void release_owner(std::uint64_t owner) noexcept {
    if (!rings_pooled.load(std::memory_order_relaxed)) return;
    std::vector<std::unique_ptr<worker_ring>> refused;
    pool_state& s = process_pool();  // made before rings_pooled was set: cannot throw
    std::lock_guard lock(s.mutex);
    for (auto it = s.rings.begin(); it != s.rings.end();) {
        if (it->owner != owner) {
            ++it;
        } else if (it->ring->detach()) {
            it->owner = 0;
            ++it;
        } else {
            refused.push_back(std::move(it->ring));  // destroying it drops the file
            it = s.rings.erase(it);
        }
    }
}

std::size_t idle_rings() noexcept {
    if (!rings_pooled.load(std::memory_order_relaxed)) return 0;
    pool_state& s = process_pool();
    std::lock_guard lock(s.mutex);
    return s.rings.size();
}

}  // namespace ringsafe::uring
