// Worker threads for the read executor, taken from the process-wide pool
// (engine-internal): a thread that finished a task waits for the next one
// (for a while, a bounded number of them) instead of exiting.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>

namespace ringsafe::uring {

// The tasks one execution runs on other threads; wait() (or the destructor)
// returns once every started task has returned. Not thread-safe itself.
class thread_group {
public:
    thread_group() = default;
    thread_group(const thread_group&) = delete;
    thread_group& operator=(const thread_group&) = delete;
    ~thread_group() { wait(); }

    // Runs `task` on an idle pooled thread, a new one, or (pool off, see
    // ring_pool_enabled) a new thread of its own. False, with `task` not run,
    // when no thread could be had (none can be made, or the process is exiting).
    bool start(std::function<void()> task) noexcept;
    // Waits until every started task has returned (and its captures are destroyed).
    void wait() noexcept;

    // One started task has returned (called last by the thread that ran it).
    void finished() noexcept;

private:
    std::mutex mutex_;
    std::condition_variable done_;
    std::size_t running_ = 0;
};

// Threads this process's thread_groups have started so far, and pooled
// threads waiting for work now (for tests and benchmarks of the pool).
std::uint64_t worker_threads_started() noexcept;
std::size_t idle_threads() noexcept;

}  // namespace ringsafe::uring
