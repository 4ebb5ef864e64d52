// The writer's io_uring executor: keeps up to `depth` writes in flight on one
// file, resubmits short writes for the remainder, retries -EAGAIN/-EINTR, and
// converts -errno to std::error_code here and nowhere else.
//
// Single-threaded: one thread (or strand) submits and reaps. Completion is
// reported per token through the callback given to the constructor, after
// every byte of that write has landed (or it failed). Two ways to drive it:
// blocking (submit / wait_one / drain, the writer's own calls) or event-driven
// (enqueue / submit_op never block; an eventfd attached with attach_eventfd
// is signalled per completion, and reap_ready() takes what is there; the
// async writer watches that eventfd from the caller's io_context).
// Lives with the other rings in engine/uring, in ringsafe::uring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <system_error>
#include <memory>
#include <vector>

// liburing's types, kept out of this header: the async writer (engine/asio)
// drives the ring through the methods below and never sees io_uring.
struct io_uring;
struct io_uring_cqe;
struct io_uring_sqe;

namespace ringsafe::uring {

// Test hook at the completion edge (the read side's is fault_injection.hpp's
// completion_fault): called with each CQE's result before the
// ring acts on it; it may return a different result (a negative errno, or a
// shorter count). One-shot operations (submit_op: fsync, openat, renameat...)
// report file_offset one_shot_offset and length 0. Null (the default) in
// production. Not thread-safe to change while a writer runs.
using write_completion_fault_fn = int (*)(std::uint64_t file_offset, std::uint32_t length, int result);
extern write_completion_fault_fn write_completion_fault;
inline constexpr std::uint64_t one_shot_offset = ~std::uint64_t(0);
// Test hook at the submission edge: when it returns true for an operation
// (arguments as above), a no-op goes to the kernel in its place and the
// operation completes with -ECANCELED, as io-wq reports work it cancelled
// before running it. Null (the default) in production.
using write_cancel_fault_fn = bool (*)(std::uint64_t file_offset, std::uint32_t length);
extern write_cancel_fault_fn write_cancel_fault;

class write_ring {
public:
    // Called once per submitted write: ec empty on success. Runs on the
    // thread that called submit()/wait_*().
    using done_fn = std::function<void(std::uint64_t token, std::error_code ec, std::uint64_t offset)>;

    write_ring(int fd, unsigned depth, done_fn done);
    ~write_ring();
    write_ring(const write_ring&) = delete;
    write_ring& operator=(const write_ring&) = delete;

    // Queues a write of `length` bytes from `data` at file `offset`. Blocks
    // while `depth` writes are in flight. `data` must stay valid until the
    // token's completion has been reported.
    void submit(std::uint64_t offset, const std::byte* data, std::uint64_t length,
                std::uint64_t token);
    // Queues the same write without blocking: it goes to the kernel now when a
    // slot is free, else when a completion frees one (in submission order).
    void enqueue(std::uint64_t offset, const std::byte* data, std::uint64_t length, std::uint64_t token);
    // One-shot operations (the async finish's header write and publish
    // steps): queued without blocking; `done` gets the result (>= 0 or
    // -errno) when reaped. Paths are held by the ring until then.
    //
    // pwrite of `len` bytes of `data` (valid until `done` runs) at `offset`
    // of `fd`, once: a short count is the caller's to continue.
    void submit_write_once(int fd, const std::byte* data, unsigned len, std::uint64_t offset,
                           std::function<void(int)> done);
    // fsync(fd).
    void submit_fsync(int fd, std::function<void(int)> done);
    // linkat(AT_FDCWD, from, AT_FDCWD, to, AT_SYMLINK_FOLLOW).
    void submit_linkat(std::string from, std::string to, std::function<void(int)> done);
    // renameat(AT_FDCWD, from, AT_FDCWD, to).
    void submit_renameat(std::string from, std::string to, std::function<void(int)> done);
    // openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC): `done` gets
    // the descriptor; one the ring is destroyed before handing over is closed.
    void submit_open_dir(std::string dir, std::function<void(int)> done);
    // Reaps at least one completion (blocking) when any write is in flight.
    void wait_one();
    // Reaps every completion already posted, without blocking.
    void reap_ready();
    // Waits until nothing is in flight.
    void drain();
    // Operations owned by the kernel, and those plus the ones still queued.
    unsigned in_flight() const noexcept { return in_flight_; }
    std::size_t busy() const noexcept { return in_flight_ + queued_.size(); }
    // Signals `efd` (an eventfd the caller owns and keeps open while the ring
    // lives) on every completion. Throws naming io_uring_register_eventfd.
    void attach_eventfd(int efd);
    // Swaps the file the next submissions go to (after a relocation).
    void set_fd(int fd) noexcept { fd_ = fd; }

private:
    struct op {
        std::uint64_t offset = 0;
        const std::byte* data = nullptr;
        std::uint64_t remaining = 0;
        std::uint64_t token = 0;
        bool busy = false;
        unsigned retries = 0;        // transient results in a row
        bool cancel_injected = false;  // write_cancel_fault replaced it with a no-op
        bool result_is_fd = false;     // a one-shot openat: its result is a descriptor
        std::function<void(io_uring_sqe*)> prep;  // one-shot operations only
        std::function<void(int)> done;
    };
    // Queues a one-shot operation: `prep` fills the SQE; its pointers stay
    // valid while `prep` lives (until `done` runs). `result_is_fd` (openat):
    // a descriptor it returns is closed when the ring is destroyed first.
    void submit_op(std::function<void(io_uring_sqe*)> prep, std::function<void(int)> done, bool result_is_fd = false);
    static std::uint64_t sqe_length(const op& o) noexcept;  // bytes its next SQE writes (0: one-shot)
    void start(op o);  // into a free slot, or the queue
    void push(std::size_t slot);
    void reap(io_uring_cqe* cqe);

    std::unique_ptr<io_uring> ring_;  // liburing's ring
    int fd_;
    unsigned depth_;
    unsigned in_flight_ = 0;
    done_fn done_;
    std::vector<op> ops_;
    std::deque<op> queued_;  // waiting for a slot (enqueue / submit_op)
};

}  // namespace ringsafe::uring
