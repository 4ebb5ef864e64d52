// process_pool: one pool_state per process, handed over across fork() and
// closed at exit.
#include "uring/pool_state.hpp"

#include <pthread.h>

#include <atomic>
#include <cstdlib>

#include "source/fork_generation.hpp"

namespace ringsafe::uring {
namespace {

std::atomic<pool_state*> live_pool{nullptr};

// fork(): the forking thread holds the state's mutex across it, so that the
// child's copy of the idle lists is consistent (no other thread was midway
// through changing them).
void before_fork() noexcept { live_pool.load(std::memory_order_acquire)->mutex.lock(); }
void after_fork_parent() noexcept { live_pool.load(std::memory_order_acquire)->mutex.unlock(); }

// The child runs on one thread: its parent's pooled threads are gone and its
// idle rings share their SQ/CQ memory with the parent's. It abandons those
// rings and starts from an empty state.
void after_fork_child() noexcept {
    pool_state* old = live_pool.load(std::memory_order_relaxed);
    for (idle_ring& r : old->rings) r.ring->abandon();
    old->rings.clear();  // frees their bounce buffers; abandoned rings touch nothing else
    pool_state* fresh = new (std::nothrow) pool_state;
    if (!fresh) {
        // No memory for a fresh state: close the old one (nothing is pooled
        // or handed out from it any more); it still works as a lock.
        old->closed = true;
        old->mutex.unlock();
        return;
    }
    fresh->parent = old;
    live_pool.store(fresh, std::memory_order_release);
}

// At exit: idle rings are torn down and idle threads told to end (they are
// detached; those still running a task finish it). Nothing is joined, so
// exit() cannot hang here, whatever other threads are doing.
void at_exit() noexcept {
    pool_state& s = *live_pool.load(std::memory_order_acquire);
    std::vector<idle_ring> rings;
    {
        std::lock_guard lock(s.mutex);
        s.closed = true;
        rings.swap(s.rings);
    }
    s.work.notify_all();
}

bool install() {
    // fork_generation's handler goes first, so that a child's inherited rings
    // already know they are inherited when ours runs.
    (void)detail::fork_generation();
    live_pool.store(new pool_state, std::memory_order_release);  // throws: retried on the next call
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    std::atexit(at_exit);
    return true;
}

}  // namespace

pool_state& process_pool() {
    static const bool installed = install();
    (void)installed;
    return *live_pool.load(std::memory_order_acquire);
}

}  // namespace ringsafe::uring
