// io_uring write executor (see write_ring.hpp).
#include "uring/write_ring.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ringsafe/error.hpp"
#include "uring/completion_drain.hpp"
#include "uring/eventfd.hpp"
#include "uring/transient_result.hpp"

namespace ringsafe::uring {

write_completion_fault_fn write_completion_fault = nullptr;
write_cancel_fault_fn write_cancel_fault = nullptr;

namespace {
// One SQE moves at most this much; longer writes continue like short ones.
constexpr std::uint64_t max_sqe_bytes = 1u << 30;
}  // namespace

std::uint64_t write_ring::sqe_length(const op& o) noexcept {
    return o.prep ? 0 : o.remaining < max_sqe_bytes ? o.remaining : max_sqe_bytes;
}

write_ring::write_ring(int fd, unsigned depth, done_fn done)
    : ring_(std::make_unique<io_uring>()), fd_(fd), depth_(depth ? depth : 1), done_(std::move(done)), ops_(depth_) {
    int r = io_uring_queue_init(depth_ * 2, ring_.get(), 0);
    if (r < 0) raise_errno(-r, "io_uring_queue_init for the writer");
}

write_ring::~write_ring() {
    // Never leave the kernel writing from memory that may be freed next.
    // A descriptor an openat returned now has nobody to close it.
    uring::drain_completions(*ring_, in_flight_, [this](io_uring_cqe* cqe) {
        op& o = ops_[io_uring_cqe_get_data64(cqe)];
        if (o.result_is_fd && !o.cancel_injected && cqe->res >= 0) ::close(cqe->res);
        o.busy = false;
        return true;
    });
    io_uring_queue_exit(ring_.get());
}

void write_ring::attach_eventfd(int efd) {
    uring::register_eventfd(*ring_, efd, "io_uring_register_eventfd for the writer");
}

void write_ring::push(std::size_t slot) {
    auto& o = ops_[slot];
    io_uring_sqe* sqe = io_uring_get_sqe(ring_.get());
    if (!sqe) {
        io_uring_submit(ring_.get());
        sqe = io_uring_get_sqe(ring_.get());
    }
    const auto len = static_cast<unsigned>(sqe_length(o));
    o.cancel_injected = write_cancel_fault && write_cancel_fault(o.prep ? one_shot_offset : o.offset, len);
    if (o.cancel_injected) {
        io_uring_prep_nop(sqe);
    } else if (o.prep) {
        o.prep(sqe);
    } else {
        io_uring_prep_write(sqe, fd_, o.data, len, o.offset);
    }
    io_uring_sqe_set_data64(sqe, slot);
    int r = io_uring_submit(ring_.get());
    if (r < 0) raise_errno(-r, "io_uring_submit for the writer");
}

void write_ring::start(op o) {
    o.busy = true;
    if (in_flight_ >= depth_) {
        queued_.push_back(std::move(o));
        return;
    }
    std::size_t slot = 0;
    while (ops_[slot].busy) ++slot;
    ops_[slot] = std::move(o);
    ++in_flight_;
    push(slot);
}

void write_ring::submit(std::uint64_t offset, const std::byte* data, std::uint64_t length,
                        std::uint64_t token) {
    while (in_flight_ >= depth_) wait_one();
    enqueue(offset, data, length, token);
}

void write_ring::enqueue(std::uint64_t offset, const std::byte* data, std::uint64_t length,
                         std::uint64_t token) {
    if (length == 0) {
        done_(token, {}, offset);
        return;
    }
    op o;
    o.offset = offset;
    o.data = data;
    o.remaining = length;
    o.token = token;
    start(std::move(o));
}

void write_ring::submit_op(std::function<void(io_uring_sqe*)> prep, std::function<void(int)> done,
                           bool result_is_fd) {
    op o;
    o.prep = std::move(prep);
    o.done = std::move(done);
    o.result_is_fd = result_is_fd;
    start(std::move(o));
}

void write_ring::submit_write_once(int fd, const std::byte* data, unsigned len, std::uint64_t offset,
                                   std::function<void(int)> done) {
    submit_op([=](io_uring_sqe* sqe) { io_uring_prep_write(sqe, fd, data, len, offset); }, std::move(done));
}

void write_ring::submit_fsync(int fd, std::function<void(int)> done) {
    submit_op([fd](io_uring_sqe* sqe) { io_uring_prep_fsync(sqe, fd, 0); }, std::move(done));
}

void write_ring::submit_linkat(std::string from, std::string to, std::function<void(int)> done) {
    submit_op(
        [from = std::move(from), to = std::move(to)](io_uring_sqe* sqe) {
            io_uring_prep_linkat(sqe, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), AT_SYMLINK_FOLLOW);
        },
        std::move(done));
}

void write_ring::submit_renameat(std::string from, std::string to, std::function<void(int)> done) {
    submit_op(
        [from = std::move(from), to = std::move(to)](io_uring_sqe* sqe) {
            io_uring_prep_renameat(sqe, AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), 0);
        },
        std::move(done));
}

void write_ring::submit_open_dir(std::string dir, std::function<void(int)> done) {
    submit_op(
        [dir = std::move(dir)](io_uring_sqe* sqe) {
            io_uring_prep_openat(sqe, AT_FDCWD, dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
        },
        std::move(done), true);
}

void write_ring::reap(io_uring_cqe* cqe) {
    std::size_t slot = io_uring_cqe_get_data64(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(ring_.get(), cqe);
    auto& o = ops_[slot];
    // A freed slot takes the next queued operation before any callback runs
    // (a callback may queue more, behind those already waiting).
    auto release = [&] {
        o.busy = false;
        --in_flight_;
        if (!queued_.empty()) {
            ops_[slot] = std::move(queued_.front());
            queued_.pop_front();
            ++in_flight_;
            push(slot);
        }
    };
    if (o.cancel_injected) res = -ECANCELED;
    const bool one_shot = static_cast<bool>(o.prep);
    const std::uint64_t asked = sqe_length(o);
    if (write_completion_fault)
        res = write_completion_fault(one_shot ? one_shot_offset : o.offset, static_cast<std::uint32_t>(asked), res);
    // This ring never cancels its operations: every -ECANCELED is io-wq's.
    if (uring::transient_result(res) && ++o.retries <= uring::max_transient_retries) {
        push(slot);
        return;
    }
    if (one_shot) {
        auto done = std::move(o.done);
        o.prep = nullptr;
        release();
        done(res);
        return;
    }
    std::error_code ec;
    if (res < 0) {
        ec = std::error_code(-res, std::system_category());
    } else if (res == 0) {
        ec = make_error_code(errc::IoError);  // a write that made no progress
    } else {
        auto n = static_cast<std::uint64_t>(res) < asked ? static_cast<std::uint64_t>(res) : asked;
        o.offset += n;
        o.data += n;
        o.remaining -= n;
        o.retries = 0;
        if (o.remaining) {
            push(slot);  // short write: the rest goes out as a new SQE
            return;
        }
    }
    std::uint64_t token = o.token, end = o.offset;
    release();
    done_(token, ec, end);
}

void write_ring::wait_one() {
    if (!in_flight_) return;
    io_uring_cqe* cqe = nullptr;
    int r;
    do {
        r = io_uring_wait_cqe(ring_.get(), &cqe);
    } while (r == -EINTR);
    if (r < 0) raise_errno(-r, "io_uring_wait_cqe for the writer");
    reap(cqe);
    // Take whatever else is ready without blocking.
    while (in_flight_ && io_uring_peek_cqe(ring_.get(), &cqe) == 0) reap(cqe);
}

void write_ring::reap_ready() {
    io_uring_cqe* cqe = nullptr;
    while (in_flight_ && io_uring_peek_cqe(ring_.get(), &cqe) == 0) reap(cqe);
}

void write_ring::drain() {
    while (in_flight_) wait_one();
}

}  // namespace ringsafe::uring
