// thread_group over the pool's threads: hand-off, idle wait, exit.
#include "uring/worker_threads.hpp"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

#include "uring/pool_state.hpp"
#include "uring/ring_pool.hpp"

namespace ringsafe::uring {
namespace {

std::atomic<std::uint64_t> threads_started{0};
std::atomic<bool> threads_pooled{false};

// Threads kept waiting for work, and for how long: enough for every helper of
// a few concurrent executions; an idle one ends after the timeout.
unsigned max_idle_threads() noexcept {
    // hardware_concurrency() reads /sys on every call (glibc): once is enough.
    static const unsigned n = std::max(8u, 2 * std::thread::hardware_concurrency());
    return n;
}
constexpr auto idle_timeout = std::chrono::seconds(10);

// Runs the task's body, destroys it (its captures die before the group hears
// of it), then tells the group.
void run_task(pool_task& t) noexcept {
    t.body();
    t.body = nullptr;
    t.group->finished();
}

// A pooled thread: runs `task`, then tasks handed to it while the pool has
// room for it, until it waited idle_timeout for one or the process exits.
// It counts itself idle before its group hears the task is done, so that the
// group's owner finds it on its next start(). Touches only `s` (never
// destroyed) and the group it serves, so exit() may overtake it anywhere.
void pooled_thread(pool_state* s, pool_task task) {
    std::unique_lock lock(s->mutex, std::defer_lock);
    for (;;) {
        task.body();
        task.body = nullptr;
        lock.lock();
        const bool stay = !s->closed && s->idle_threads < max_idle_threads();
        if (stay) ++s->idle_threads;
        lock.unlock();
        task.group->finished();
        if (!stay) return;
        lock.lock();
        const bool got = s->work.wait_for(lock, idle_timeout, [s] { return s->closed || !s->tasks.empty(); });
        --s->idle_threads;
        if (!got || s->tasks.empty()) return;
        task = std::move(s->tasks.front());
        s->tasks.pop_front();
        lock.unlock();
    }
}

// Blocks every signal in the calling thread for its lifetime, so that a
// thread started meanwhile starts with all of them blocked.
struct signals_blocked {
    sigset_t old{};
    signals_blocked() noexcept {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
    }
    ~signals_blocked() { pthread_sigmask(SIG_SETMASK, &old, nullptr); }
    signals_blocked(const signals_blocked&) = delete;
    signals_blocked& operator=(const signals_blocked&) = delete;
};

// Hands `task` to the pool; false when no thread could be had. A new pooled
// thread blocks every signal (as Asio's internal threads do): it outlives the
// call that started it, and a signal meant for the application must not run
// the application's handler on it, or find it when the handler is gone.
bool pool_start(pool_task& task) noexcept {
    try {
        pool_state& s = process_pool();
        {
            std::lock_guard lock(s.mutex);
            if (s.closed) return false;
            // Every queued task has an idle thread that will take it.
            if (s.idle_threads > s.tasks.size()) {
                s.tasks.push_back(std::move(task));
                s.work.notify_one();
                return true;
            }
        }
        threads_pooled.store(true, std::memory_order_relaxed);
        signals_blocked blocked;
        std::thread(pooled_thread, &s, std::move(task)).detach();
        threads_started.fetch_add(1, std::memory_order_relaxed);
        return true;
    } catch (...) {
        return false;
    }
}

}  // namespace

bool thread_group::start(std::function<void()> task) noexcept {
    {
        std::lock_guard lock(mutex_);
        ++running_;
    }
    pool_task t{std::move(task), this};
    bool ok = false;
    if (ring_pool_enabled()) {
        ok = pool_start(t);
    } else {
        try {
            std::thread([t = std::move(t)]() mutable { run_task(t); }).detach();
            threads_started.fetch_add(1, std::memory_order_relaxed);
            ok = true;
        } catch (...) {
        }
    }
    if (!ok) finished();
    return ok;
}

void thread_group::wait() noexcept {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return running_ == 0; });
}

void thread_group::finished() noexcept {
    // Notified under the lock: the waiter cannot return, and destroy the
    // group, before this thread is done with it.
    std::lock_guard lock(mutex_);
    if (--running_ == 0) done_.notify_all();
}

std::uint64_t worker_threads_started() noexcept { return threads_started.load(std::memory_order_relaxed); }

std::size_t idle_threads() noexcept {
    if (!threads_pooled.load(std::memory_order_relaxed)) return 0;
    pool_state& s = process_pool();
    std::lock_guard lock(s.mutex);
    return s.idle_threads;
}

}  // namespace ringsafe::uring
