// Engine calls made from Python: run without the GIL, and while one runs the
// calling thread keeps Python's signal handlers (Ctrl-C) and the caller's
// progress callback working (engine-internal, the Python front end only).
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "ringsafe/plan.hpp"

namespace ringsafe::python {

// One engine job and what its waiter sees of it. The job reads `cancel` (via
// control()) and reports bytes into `done`/`total`.
class pending_call {
public:
    std::atomic<bool> cancel{false};
    std::atomic<std::uint64_t> done{0};
    std::atomic<std::uint64_t> total{0};
    // Called after each progress report the job makes through control(), on the
    // reporting thread (run_on_caller's hook into the job; empty otherwise).
    std::function<void()> on_report;
    // A read_control wired to `cancel`, `done`/`total` and on_report.
    read_control control();
    // Blocks (GIL released) until the job has ended. Every poll interval it
    // takes the GIL, runs Python's signal handlers and calls progress(done,
    // total) when given: if either raises (KeyboardInterrupt), the job is
    // cancelled, waited for, and that Python exception is raised. Otherwise
    // the job's own exception, if any, is rethrown. Callable once.
    void wait(const pybind11::object& progress);
    // Like wait(), but when Python raises (Ctrl-C) it returns at once with that
    // exception instead of waiting for the job, which runs on to its end
    // unobserved: only for jobs that own everything they touch (an open).
    void wait_or_abandon();
    bool finished() const;
    // Blocks until the job has ended, without touching Python (GIL released by the caller).
    void wait_quiet();

    // For the call thread.
    void finish(std::exception_ptr error);

private:
    // Waits, the GIL released, until the job has ended; calls tick() (GIL held)
    // every poll interval meanwhile. An exception from tick() ends the wait.
    void poll_until_finished(const std::function<void()>& tick);

    mutable std::mutex m_;
    std::condition_variable cv_;
    bool finished_ = false;
    std::exception_ptr error_;
};

// Starts `job` on a call thread (threads are reused; a process that forks
// gets a fresh set in the child). The job must not touch Python objects.
// Called with the GIL held. When the system refuses a thread the job runs on
// the calling thread instead (the GIL released), and Ctrl-C waits for its end.
std::shared_ptr<pending_call> start_call(std::function<void(pending_call&)> job);

// What Python holds of a started job: the job and the objects owning the
// memory it writes. Dropping it before the job ended cancels the job and
// waits for it, so no I/O lands in memory Python has freed.
struct py_pending {
    std::shared_ptr<pending_call> call;
    std::vector<pybind11::object> keep;
    py_pending(std::shared_ptr<pending_call> c, std::vector<pybind11::object> k)
        : call(std::move(c)), keep(std::move(k)) {}
    py_pending(const py_pending&) = delete;
    py_pending& operator=(const py_pending&) = delete;
    ~py_pending();
};

// start_call + wait, or for small jobs (`small`) the job inline with the GIL
// released (no thread hand-off; Ctrl-C is seen when it returns: callers pass
// small only for work that cannot stall, e.g. local reads, never a URL's).
void run_blocking(std::function<void(pending_call&)> job, const pybind11::object& progress, bool small);

// `job` on the calling thread, the GIL released: for work that is fastest where
// the caller runs (a buffered save: the kernel takes new page-cache pages from
// the running CPU's free lists, where the caller's own freed memory is). The
// job's progress reports (control()) take the GIL, on the first report and then
// at most every poll interval, to run Python's signal handlers and
// progress(done, total): if either raises (KeyboardInterrupt), the job is
// cancelled and that exception raised once it returned. The job must report
// progress as it goes, or Ctrl-C waits for its end.
void run_on_caller(std::function<void(pending_call&)> job, const pybind11::object& progress);

// Jobs below this many bytes run inline.
inline constexpr std::uint64_t inline_job_bytes = 4u << 20;

}  // namespace ringsafe::python
