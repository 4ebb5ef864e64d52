// What the process-wide ring and thread pools keep, and its lifecycle across
// fork() and exit (engine-internal; ring_pool.hpp and worker_threads.hpp are
// the interfaces).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "uring/worker_ring.hpp"

namespace ringsafe::uring {

class thread_group;

// A task for a pooled thread: `body`, then group->finished().
struct pool_task {
    std::function<void()> body;
    thread_group* group = nullptr;
};

// An idle ring and the file owner it is still attached to (0: detached).
struct idle_ring {
    std::unique_ptr<worker_ring> ring;
    std::uint64_t owner = 0;
};

struct pool_state {
    std::mutex mutex;  // guards everything below
    // The process is exiting: nothing is pooled any more (rings handed back
    // are destroyed, no thread is handed out).
    bool closed = false;
    std::vector<idle_ring> rings;  // oldest first
    std::condition_variable work;  // idle threads wait here for tasks
    std::deque<pool_task> tasks;
    unsigned idle_threads = 0;  // threads waiting on `work`, or woken and not yet holding a task
    // In a fork() child: the parent's state, abandoned (kept reachable, never
    // destroyed: its mutex and condition variable may still record the
    // parent's threads, which do not exist here).
    pool_state* parent = nullptr;
};

// This process's pool state, made on first use; never destroyed (a reader in
// a static, or a pooled thread, may use it during static destruction). At
// exit (atexit, registered on first use) it is closed and its idle rings are
// destroyed; in a fork() child the next call returns a fresh state, the
// parent's idle rings having been abandoned (unmapped and closed, not torn
// down: their memory is shared with the parent).
pool_state& process_pool();

}  // namespace ringsafe::uring
