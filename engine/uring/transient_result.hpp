// Completion results that mean "not done yet, submit it again", shared by
// every io_uring user in the engine (reader workers, async reads and opens,
// the write ring).
#pragma once

#include <cerrno>

namespace ringsafe::uring {

// -EAGAIN and -EINTR, and a -ECANCELED the engine did not ask for: io-wq
// cancels queued work before it runs when it cannot start a worker thread
// while a signal is pending (it gives up after WORKER_INIT_LIMIT tries).
// Callers that cancel their own operations check that first.
inline bool transient_result(int res) noexcept { return res == -EAGAIN || res == -EINTR || res == -ECANCELED; }

// Transient results in a row for one operation before it counts as failed.
inline constexpr unsigned max_transient_retries = 10000;

}  // namespace ringsafe::uring
