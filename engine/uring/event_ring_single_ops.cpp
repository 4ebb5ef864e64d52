// event_ring, single operations: async_open's openat and header reads
// on the same ring as the tensor reads, and their cancellation.
#include <cerrno>

#include "uring/event_ring.hpp"
#include "uring/event_ring_user_data.hpp"

namespace ringsafe::uring {

std::uint64_t event_ring::submit_single(const std::function<void(io_uring_sqe*)>& prep, std::shared_ptr<void> keep,
                                        std::function<void(int)> done) {
    const std::uint64_t ud = (++next_single_ << 32) | single_low;
    io_uring_sqe* sqe = broken_ ? nullptr : io_uring_get_sqe(&ring_);
    if (!sqe && !broken_) {
        flush();
        sqe = broken_ ? nullptr : io_uring_get_sqe(&ring_);
    }
    if (!sqe) {
        driver_->defer([d = std::move(done), res = broken_ ? -EIO : -EBUSY] { d(res); });
        return ud;
    }
    prep(sqe);
    io_uring_sqe_set_data64(sqe, ud);
    singles_.emplace(ud, single{std::move(keep), std::move(done)});
    ++in_flight_;
    flush();
    return ud;
}

void event_ring::cancel_single(std::uint64_t id) {
    if (!singles_.count(id)) return;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) {
        flush();
        sqe = io_uring_get_sqe(&ring_);
    }
    if (!sqe) return;  // it completes by itself
    io_uring_prep_cancel64(sqe, id, 0);
    io_uring_sqe_set_data64(sqe, cancel_marker);
    flush();
}

}  // namespace ringsafe::uring
