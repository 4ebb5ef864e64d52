// event_ring: submit/reap loop of the event-driven file-read ring.
#include "uring/event_ring.hpp"
#include "uring/event_ring_user_data.hpp"

#include <liburing.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "ringsafe/error.hpp"
#include "uring/completion_drain.hpp"
#include "uring/eventfd.hpp"
#include "uring/fault_injection.hpp"
#include "uring/transient_result.hpp"

namespace ringsafe::uring {

event_ring::event_ring(unsigned depth) : ring_(std::make_unique<io_uring>()) {
    if (depth == 0 || depth > 4096) raise(errc::InvalidArgument, "async_options: queue_depth must be 1..4096");
    // Room for one cancel per read in flight besides the reads themselves.
    const int r = io_uring_queue_init(depth * 2, ring_.get(), 0);
    if (r < 0) raise_errno(-r, "ringsafe async reads: io_uring_queue_init");
    ring_ok_ = true;
    try {
        event_fd_ = open_eventfd("ringsafe async reads");
        register_eventfd(*ring_, event_fd_, "ringsafe async reads: io_uring_register_eventfd");
    } catch (...) {
        io_uring_queue_exit(ring_.get());
        ring_ok_ = false;
        if (event_fd_ >= 0) ::close(event_fd_);
        throw;
    }
    slots_.resize(depth);
    bounces_.resize(depth);
    for (unsigned i = depth; i-- > 0;) free_.push_back(i);
}

event_ring::~event_ring() { close_ring(); }

// Cancels and waits for what the kernel owns (it must not write into caller
// memory afterwards), then closes the ring and its eventfd.
void event_ring::close_ring() noexcept {
    if (!ring_ok_) return;
    if (in_flight_ > 0) {
        if (io_uring_sqe* sqe = io_uring_get_sqe(ring_.get())) {
            io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
            io_uring_sqe_set_data64(sqe, cancel_marker);
        }
        io_uring_submit(ring_.get());
        drain_completions(*ring_, in_flight_, [this](io_uring_cqe* cqe) {
            const std::uint64_t ud = io_uring_cqe_get_data64(cqe);
            if (ud == cancel_marker) return false;
            // A descriptor an openat returned now has nobody to close it.
            if (auto it = singles_.find(ud); it != singles_.end() && it->second.result_is_fd && cqe->res >= 0)
                ::close(cqe->res);
            return true;
        });
    }
    io_uring_queue_exit(ring_.get());
    ring_ok_ = false;
    driver_.reset();  // stops watching the eventfd before it is closed
    ::close(event_fd_);
    event_fd_ = -1;
}

void event_ring::shutdown() {
    close_ring();
    if (!broken_) broken_ = std::make_error_code(std::errc::operation_canceled);
    // The callbacks go without running: moved out first, since destroying
    // them may release the last reference to what calls back into the ring.
    std::vector<std::shared_ptr<file_job>> jobs;
    for (slot& s : slots_)
        if (s.job) jobs.push_back(std::move(s.job));
    std::deque<std::shared_ptr<file_job>> queued = std::move(queue_);
    std::map<std::uint64_t, single> singles = std::move(singles_);
    std::deque<waiting_single> waiting = std::move(waiting_singles_);
    queue_.clear();
    singles_.clear();
    waiting_singles_.clear();
    for (auto& j : jobs) j->on_done = nullptr;
    for (auto& j : queued) j->on_done = nullptr;
}

void event_ring::defer(std::function<void()> fn) {
    if (driver_) driver_->defer(std::move(fn));  // none after shutdown(): nothing runs any more
}

namespace {
// A single's result on its way to `done`: a descriptor that never gets
// there (the deferred call destroyed unrun, its io_context gone) is closed.
struct delivery {
    std::function<void(int)> done;
    int res = -1;
    bool fd = false;
    ~delivery() {
        if (fd && res >= 0) ::close(res);
    }
};
}  // namespace

void event_ring::deliver(single& s, int res) {
    auto d = std::make_shared<delivery>();
    d->done = std::move(s.done);
    d->res = res;
    d->fd = s.result_is_fd;
    defer([d] { d->done(std::exchange(d->res, -1)); });
}

bool event_ring::fits_direct(std::uint32_t align, std::uint32_t mem_align) noexcept {
    return align > 0 && mem_align > 0 && align <= bounce_size && bounce_size % align == 0 &&
           bounce_align % mem_align == 0;
}

void event_ring::start(std::shared_ptr<file_job> job) {
    if (!ring_ok_) return;  // shut down: the job is dropped, its on_done never runs
    if (broken_) {
        fail(*job, broken_, *job->path + ": the async read ring failed earlier");
        finish_if_idle(*job);
        return;
    }
    // Validate before any I/O, as the synchronous executor does.
    for (const read_op& op : job->ops) {
        if (op.length == 0) continue;
        if (!op.dst || op.offset > job->size || op.length > job->size - op.offset) {
            fail(*job, make_error_code(errc::InvalidArgument),
                 *job->path + ": read of bytes " + std::to_string(op.offset) + ".." +
                     std::to_string(op.offset + op.length) + " lies outside the file (size " +
                     std::to_string(job->size) + ") or has no destination (" + job->describe(op.tag) + ")");
            finish_if_idle(*job);
            return;
        }
    }
    queue_.push_back(std::move(job));
    pump();
}

void event_ring::cancel(file_job& job) {
    if (job.done || !ring_ok_) return;
    job.cancelled = true;
    job.stopping = true;
    bool queued = false;
    for (unsigned id = 0; id < slots_.size(); ++id) {
        slot& s = slots_[id];
        if (s.job.get() != &job) continue;
        io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
        if (!sqe) {
            flush();
            sqe = io_uring_get_sqe(ring_.get());
        }
        if (!sqe) break;  // the read completes by itself; the job waits for it either way
        io_uring_prep_cancel64(sqe, user_data(id, s.generation), 0);
        io_uring_sqe_set_data64(sqe, cancel_marker);
        queued = true;
    }
    if (queued) flush();
    finish_if_idle(job);
}

void event_ring::pump() {
    bool prepared = false;
    while (!free_.empty() && !queue_.empty()) {
        file_job& j = *queue_.front();
        if (j.stopping || j.next >= j.ops.size()) {
            std::shared_ptr<file_job> gone = std::move(queue_.front());
            queue_.pop_front();
            finish_if_idle(*gone);
            continue;
        }
        const std::size_t op = j.next++;
        if (j.ops[op].length == 0) continue;
        const unsigned id = free_.back();
        if (j.direct && !bounces_[id]) {
            bounces_[id].reset(static_cast<std::byte*>(std::aligned_alloc(bounce_align, bounce_size)));
            if (!bounces_[id]) {
                fail(j, std::make_error_code(std::errc::not_enough_memory),
                     *j.path + ": no memory for an O_DIRECT bounce buffer");
                continue;
            }
        }
        free_.pop_back();
        slot& s = slots_[id];
        s.job = queue_.front();
        s.op = op;
        s.pos = j.ops[op].offset;
        s.retries = 0;
        submit_read(id);
        prepared = true;
    }
    if (prepared) flush();
    // Jobs whose ops were all empty, or that stopped, may be finished now.
    for (auto& j : queue_) finish_if_idle(*j);
}

void event_ring::submit_read(unsigned id) {
    slot& s = slots_[id];
    const read_op& op = s.job->ops[s.op];
    io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
    if (!sqe) {
        flush();
        sqe = io_uring_get_sqe(ring_.get());
    }
    std::byte* buf;
    if (s.job->direct) {
        buf = place_direct(id);
    } else {
        const std::uint64_t done = s.pos - op.offset;
        s.read_at = s.pos;
        s.read_len = std::min(op.length - done, max_read);
        s.bounced = false;
        buf = op.dst + done;
    }
    io_uring_prep_read(sqe, s.job->fd, buf, static_cast<unsigned>(s.read_len), s.read_at);
    // io-wq workers copy from the page cache; the io_context thread never does.
    // (O_DIRECT reads are issued without copying and complete asynchronously.)
    if (!s.job->direct) sqe->flags |= IOSQE_ASYNC;
    io_uring_sqe_set_data64(sqe, user_data(id, ++s.generation));
    ++s.job->in_flight;
    ++in_flight_;
}

void event_ring::flush() {
    for (;;) {
        const int r = io_uring_submit(ring_.get());
        if (r >= 0 || r == -EINTR) {
            if (r >= 0) break;
            continue;
        }
        if (r == -EAGAIN || r == -EBUSY) break;  // retried after the next completions are reaped
        fail_everything(std::error_code(-r, std::system_category()), "io_uring_enter");
        return;
    }
    arm();
}

void event_ring::arm() {
    if (armed_ || in_flight_ == 0 || !driver_) return;
    armed_ = true;
    driver_->wait_event(shared_from_this());
}

void event_ring::on_event() {
    armed_ = false;
    on_ready();
}

void event_ring::on_ready() {
    if (!ring_ok_) return;
    consume_eventfd(event_fd_);
    reap();
    if (io_uring_sq_ready(ring_.get()) > 0) flush();  // entries an earlier -EBUSY left behind
    submit_waiting_singles();
    pump();
    arm();
}

void event_ring::reap() {
    for (;;) {
        io_uring_cqe* cqe;
        unsigned head, seen = 0;
        std::vector<std::pair<unsigned, int>> results;
        std::vector<std::pair<std::uint64_t, int>> singles;
        io_uring_for_each_cqe(ring_.get(), head, cqe) {
            ++seen;
            const std::uint64_t ud = io_uring_cqe_get_data64(cqe);
            if (ud == cancel_marker) continue;
            if (is_single(ud)) {
                singles.emplace_back(ud, cqe->res);
                continue;
            }
            const auto id = static_cast<unsigned>(ud & 0xffffffffu);
            if (id >= slots_.size() || !slots_[id].job || slots_[id].generation != (ud >> 32)) continue;
            results.emplace_back(id, cqe->res);
        }
        io_uring_cq_advance(ring_.get(), seen);
        for (auto [id, res] : results) handle(id, res);
        for (auto [ud, res] : singles) {
            auto it = singles_.find(ud);
            if (it == singles_.end()) continue;
            --in_flight_;
            deliver(it->second, res);
            singles_.erase(it);
        }
        // Completions the kernel could not post to a full completion queue
        // signalled the eventfd already: fetch them now, or they would wait
        // for an unrelated wake-up.
        if (!io_uring_cq_has_overflow(ring_.get()) || io_uring_get_events(ring_.get()) < 0) return;
    }
}

void event_ring::handle(unsigned id, int res) {
    slot& s = slots_[id];
    std::shared_ptr<file_job> job = std::move(s.job);
    const read_op& op = job->ops[s.op];
    --job->in_flight;
    --in_flight_;
    std::byte* const buf = s.bounced ? bounces_[id].get() : op.dst + (s.pos - op.offset);
    completion_event ev{s.read_at, s.read_len, op.tag, buf, job->direct};
    res = apply_completion_fault(ev, res);
    auto release = [&] { free_.push_back(id); };
    auto resubmit = [&] {
        s.job = job;
        submit_read(id);
    };
    const std::string where = " at file offset " + std::to_string(s.pos) + " while reading " +
                              (job->describe ? job->describe(op.tag) : "op tag " + std::to_string(op.tag)) +
                              " (bytes " + std::to_string(op.offset) + ".." + std::to_string(op.offset + op.length) +
                              ")";
    if (res == -ECANCELED && job->stopping) {
        release();
    } else if (transient_result(res)) {
        if (job->stopping) {
            release();
        } else if (++s.retries > max_transient_retries) {
            release();
            fail(*job, std::error_code(-res, std::system_category()),
                 *job->path + ": read kept failing after " + std::to_string(max_transient_retries) + " retries" + where);
        } else {
            resubmit();
        }
    } else if (res < 0) {
        release();
        fail(*job, std::error_code(-res, std::system_category()), *job->path + ": read failed" + where);
    } else if (wanted_bytes(s, op, res) == 0) {
        release();
        fail(*job, make_error_code(errc::Truncated),
             *job->path + ": the file ended early (it shrank after open: size was " + std::to_string(job->size) +
                 " bytes)" + where);
    } else if (s.bounced && job->stopping) {
        release();  // cancelled or failed: nothing more is copied into the caller's buffer
    } else {
        const std::uint64_t got = wanted_bytes(s, op, res);
        if (s.bounced) std::memcpy(op.dst + (s.pos - op.offset), buf + (s.pos - s.read_at), got);
        job->landed += got;
        if (job->on_bytes && !job->stopping) job->on_bytes(s.op, got);
        s.pos += got;
        s.retries = 0;
        if (s.pos < op.offset + op.length && !job->stopping) {
            resubmit();  // short read: the remainder goes next
        } else {
            release();
        }
    }
    finish_if_idle(*job);
}

void event_ring::fail(file_job& job, std::error_code ec, std::string message) {
    if (!job.ec) {
        job.ec = ec;
        job.message = std::move(message);
    }
    if (!job.stopping) {
        // Stop the job's other reads early; it completes once they are back.
        job.stopping = true;
        cancel(job);
        job.cancelled = false;  // an error, not the caller's cancellation
    }
}

void event_ring::finish_if_idle(file_job& job) {
    if (job.done || job.in_flight > 0) return;
    if (!job.stopping && job.next < job.ops.size()) return;
    job.done = true;
    if (job.on_done) defer([&job, f = std::move(job.on_done)]() mutable { f(job); });
}

// Only when io_uring_enter itself fails (ENOMEM, a broken ring): reads not
// yet submitted will never complete, so every job is failed at once.
void event_ring::fail_everything(std::error_code ec, const std::string& what) {
    broken_ = ec;
    for (unsigned id = 0; id < slots_.size(); ++id) {
        slot& s = slots_[id];
        if (!s.job) continue;
        std::shared_ptr<file_job> job = std::move(s.job);
        --job->in_flight;
        --in_flight_;
        free_.push_back(id);
        fail(*job, ec, *job->path + ": " + what);
        finish_if_idle(*job);
    }
    for (auto& j : queue_) {
        fail(*j, ec, *j->path + ": " + what);
        finish_if_idle(*j);
    }
    queue_.clear();
    for (auto& [ud, s] : singles_) {
        --in_flight_;
        orphaned_.push_back(std::move(s.keep));  // the kernel may own it still
        defer([d = std::move(s.done)] { d(-EIO); });
    }
    singles_.clear();
    for (auto& w : waiting_singles_) defer([d = std::move(w.op.done)] { d(-EIO); });
    waiting_singles_.clear();
}

}  // namespace ringsafe::uring
