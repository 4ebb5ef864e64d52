// Threads the engine starts for one call (the reader's shard pools and its
// cancel watcher) or keeps (the Python front end's call threads), started so
// that the system refusing one (EAGAIN: a process, user or cgroup thread limit)
// is an answer to act on, never an exception thrown while threads already
// started are joinable (their destruction would be std::terminate).
// Engine-internal, with a test hook that refuses starts as the system would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace ringsafe::read {

// A thread running `fn`; throws std::system_error (EAGAIN) when the system (or
// the test hook) refuses one, as std::thread's constructor does.
std::thread start_thread(std::function<void()> fn);

// A thread running `fn`, or a thread that is not joinable when none could be started.
std::thread try_start_thread(std::function<void()> fn) noexcept;

// Up to `count` threads, each running `work` (copied): as many as the system
// gives, the first refusal ending the starts. The caller joins them.
std::vector<std::thread> start_threads(std::size_t count, const std::function<void()>& work) noexcept;

// Test hook: before each start through the functions above, `refuse(n)` (n
// counts those starts from 0 since the hook was installed) says whether to
// refuse it as the system would. An empty function removes the hook.
void set_thread_start_fault(std::function<bool(std::uint64_t)> refuse);

}  // namespace ringsafe::read
