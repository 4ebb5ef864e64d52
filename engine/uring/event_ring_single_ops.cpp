// event_ring, single operations: async_open's openat and header reads
// on the same ring as the tensor reads, their admission (at most `depth`
// in flight, the rest waiting in order) and their cancellation.
#include <fcntl.h>
#include <liburing.h>

#include <cerrno>

#include "uring/event_ring.hpp"
#include "uring/event_ring_user_data.hpp"

namespace ringsafe::uring {

std::uint64_t event_ring::submit_single(const std::function<void(io_uring_sqe*)>& prep,
                                        std::shared_ptr<const void> keep,
                                        std::function<void(int)> done, bool result_is_fd) {
    const std::uint64_t ud = (++next_single_ << 32) | single_low;
    if (!ring_ok_) return ud;  // shut down: `done` never runs
    if (broken_) {
        defer([d = std::move(done)] { d(-EIO); });
        return ud;
    }
    waiting_singles_.push_back({ud, prep, {std::move(keep), std::move(done), result_is_fd}});
    submit_waiting_singles();
    return ud;
}

// Submits waiting singles while fewer than `depth` are in flight and the
// submission queue has room. With reads (at most `depth`) and one cancel per
// read or single, the completions in flight stay within the completion
// queue (4 x depth entries), which therefore never overflows.
std::uint64_t event_ring::submit_openat(std::shared_ptr<const std::string> path, int flags,
                                        std::function<void(int)> done) {
    const char* name = path->c_str();
    return submit_single([name, flags](io_uring_sqe* sqe) { io_uring_prep_openat(sqe, AT_FDCWD, name, flags, 0); },
                         std::move(path), std::move(done), true);
}

std::uint64_t event_ring::submit_read(int fd, std::byte* to, unsigned len, std::uint64_t offset,
                                      std::function<void(int)> done) {
    return submit_single([=](io_uring_sqe* sqe) { io_uring_prep_read(sqe, fd, to, len, offset); }, nullptr,
                         std::move(done));
}

void event_ring::submit_waiting_singles() {
    bool prepared = false;
    while (!waiting_singles_.empty() && !broken_ && singles_.size() < slots_.size()) {
        io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
        if (!sqe) {
            flush();
            sqe = broken_ ? nullptr : io_uring_get_sqe(ring_.get());
        }
        if (!sqe) break;  // retried once completions are reaped (arm() below waits for them)
        waiting_single w = std::move(waiting_singles_.front());
        waiting_singles_.pop_front();
        w.prep(sqe);
        io_uring_sqe_set_data64(sqe, w.id);
        singles_.emplace(w.id, std::move(w.op));
        ++in_flight_;
        prepared = true;
    }
    if (prepared) flush();
}

void event_ring::cancel_single(std::uint64_t id) {
    if (!ring_ok_) return;
    for (auto it = waiting_singles_.begin(); it != waiting_singles_.end(); ++it) {
        if (it->id != id) continue;
        defer([d = std::move(it->op.done)] { d(-ECANCELED); });
        waiting_singles_.erase(it);
        return;
    }
    if (!singles_.count(id)) return;
    io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
    if (!sqe) {
        flush();
        sqe = io_uring_get_sqe(ring_.get());
    }
    if (!sqe) return;  // it completes by itself
    io_uring_prep_cancel64(sqe, id, 0);
    io_uring_sqe_set_data64(sqe, cancel_marker);
    flush();
}

}  // namespace ringsafe::uring
