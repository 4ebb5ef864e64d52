// Call threads for the Python front end (see blocking_call.hpp).
//
// Why a thread at all: Python runs signal handlers only on the main thread
// and only with the GIL, so a thread blocked in the engine would make
// Ctrl-C wait for the whole load. The caller waits on a condition variable
// instead, waking every poll interval to run the handlers. Threads are kept
// and reused: io_uring gives each submitting thread its own io-wq, which a
// fresh thread per call would have to build again.
#include "blocking_call.hpp"

#include <pthread.h>

#include <chrono>
#include <optional>
#include <thread>

#include "read/thread_start.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

constexpr auto poll_interval = std::chrono::milliseconds(20);

struct call_thread {
    std::mutex m;
    std::condition_variable cv;
    std::function<void()> job;
};

// Idle call threads. Leaked on purpose: threads are never joined (process
// exit ends them), and a forked child replaces the whole set.
struct thread_set {
    std::mutex m;
    std::vector<call_thread*> idle;
};
thread_set* threads = nullptr;
std::once_flag atfork_once;

void make_thread_set() { threads = new thread_set; }

void thread_main(call_thread* self) {
    for (;;) {
        std::function<void()> job;
        {
            std::unique_lock lk(self->m);
            self->cv.wait(lk, [&] { return static_cast<bool>(self->job); });
            job = std::move(self->job);
            self->job = nullptr;
        }
        job();
        thread_set* set = threads;
        std::lock_guard lk(set->m);
        set->idle.push_back(self);
    }
}

// An idle call thread, or a new one; nullptr when the system refuses a thread.
call_thread* take_thread() {
    std::call_once(atfork_once, [] {
        make_thread_set();
        // In a forked child the call threads do not exist: start over.
        pthread_atfork(nullptr, nullptr, [] { make_thread_set(); });
    });
    {
        std::lock_guard lk(threads->m);
        if (!threads->idle.empty()) {
            call_thread* t = threads->idle.back();
            threads->idle.pop_back();
            return t;
        }
    }
    auto t = std::make_unique<call_thread>();
    std::thread started = read::try_start_thread([p = t.get()] { thread_main(p); });
    if (!started.joinable()) return nullptr;
    started.detach();
    return t.release();
}

}  // namespace

read_control pending_call::control() {
    read_control ctl;
    ctl.cancel = &cancel;
    ctl.on_progress = [this](std::uint64_t d, std::uint64_t t) {
        total.store(t, std::memory_order_relaxed);
        // Calls from several threads may arrive out of order: keep the largest.
        std::uint64_t cur = done.load(std::memory_order_relaxed);
        while (d > cur && !done.compare_exchange_weak(cur, d, std::memory_order_relaxed)) {
        }
        if (on_report) on_report();
    };
    return ctl;
}

void pending_call::finish(std::exception_ptr error) {
    std::lock_guard lk(m_);
    error_ = std::move(error);
    finished_ = true;
    cv_.notify_all();
}

bool pending_call::finished() const {
    std::lock_guard lk(m_);
    return finished_;
}

void pending_call::poll_until_finished(const std::function<void()>& tick) {
    for (;;) {
        bool fin;
        {
            py::gil_scoped_release nogil;
            std::unique_lock lk(m_);
            fin = cv_.wait_for(lk, poll_interval, [&] { return finished_; });
        }
        if (fin) return;
        tick();
    }
}

void pending_call::wait(const py::object& progress) {
    std::optional<py::error_already_set> raised;
    poll_until_finished([&] {
        if (raised) return;
        try {
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            if (!progress.is_none()) progress(done.load(), total.load());
        } catch (py::error_already_set& e) {
            raised.emplace(std::move(e));
            cancel.store(true);
        }
    });
    if (raised) throw *raised;
    if (error_) std::rethrow_exception(error_);
    if (!progress.is_none()) progress(done.load(), total.load());
}

void pending_call::wait_or_abandon() {
    poll_until_finished([&] {
        if (PyErr_CheckSignals() != 0) {
            cancel.store(true);
            throw py::error_already_set();
        }
    });
    if (error_) std::rethrow_exception(error_);
}

void pending_call::wait_quiet() {
    std::unique_lock lk(m_);
    cv_.wait(lk, [&] { return finished_; });
}

py_pending::~py_pending() {
    if (call && !call->finished()) {
        call->cancel.store(true);
        py::gil_scoped_release nogil;
        call->wait_quiet();
    }
}

std::shared_ptr<pending_call> start_call(std::function<void(pending_call&)> job) {
    auto pc = std::make_shared<pending_call>();
    std::function<void()> run = [pc, job = std::move(job)] {
        std::exception_ptr err;
        try {
            job(*pc);
        } catch (...) {
            err = std::current_exception();
        }
        pc->finish(std::move(err));
    };
    call_thread* t = take_thread();
    if (!t) {  // no thread to be had: the job runs here, to its end, before its waiter waits
        py::gil_scoped_release nogil;
        run();
        return pc;
    }
    {
        std::lock_guard lk(t->m);
        t->job = std::move(run);
    }
    t->cv.notify_one();
    return pc;
}

void run_blocking(std::function<void(pending_call&)> job, const py::object& progress, bool small) {
    if (!small) {
        start_call(std::move(job))->wait(progress);
        return;
    }
    pending_call pc;
    {
        py::gil_scoped_release nogil;
        job(pc);
    }
    if (!progress.is_none()) progress(pc.done.load(), pc.total.load());
}

void run_on_caller(std::function<void(pending_call&)> job, const py::object& progress) {
    pending_call pc;
    std::optional<py::error_already_set> raised;
    const auto caller = std::this_thread::get_id();
    auto next_tick = std::chrono::steady_clock::time_point::min();
    pc.on_report = [&] {
        // Only the calling thread may take the GIL back here (it released it).
        if (raised || std::this_thread::get_id() != caller) return;
        const auto now = std::chrono::steady_clock::now();
        if (now < next_tick) return;
        next_tick = now + poll_interval;
        py::gil_scoped_acquire gil;
        try {
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
            if (!progress.is_none()) progress(pc.done.load(), pc.total.load());
        } catch (py::error_already_set& e) {
            raised.emplace(std::move(e));
            pc.cancel.store(true);
        }
    };
    std::exception_ptr error;
    {
        py::gil_scoped_release nogil;
        try {
            job(pc);
        } catch (...) {
            error = std::current_exception();
        }
    }
    if (raised) throw *raised;  // the job ended cancelled: the Python exception is what the caller sees
    if (error) std::rethrow_exception(error);
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (!progress.is_none()) progress(pc.done.load(), pc.total.load());
}

}  // namespace ringsafe::python
