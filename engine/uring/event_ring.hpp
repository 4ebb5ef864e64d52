// The event-driven file-read ring (engine-internal): one io_uring whose
// completions signal an eventfd, for an event loop to wait on. Buffered and
// O_DIRECT files (the latter through per-slot aligned bounce buffers where a
// piece cannot land in the caller's buffer), and single operations (the async
// open's openat and header reads).
//
// Free of any event library: a driver (engine/asio's ring_driver) waits on
// event_fd() and calls on_event() when it is readable, and runs the ring's
// callbacks later through defer(). Every method runs in the driver's
// serialized context (a strand).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "source/async_source.hpp"
#include "uring/file_job.hpp"

// liburing's types, kept out of this header: the async front end (engine/asio)
// drives the ring through the methods below and never sees io_uring.
struct io_uring;
struct io_uring_sqe;

namespace ringsafe::uring {

class event_ring : public detail::async_ring, public std::enable_shared_from_this<event_ring> {
public:
    // What drives the ring: waits on its eventfd and serializes every call.
    class driver {
    public:
        virtual ~driver() = default;
        // Runs `fn` later (never inline), serialized with every call into the ring.
        virtual void defer(std::function<void()> fn) = 0;
        // Calls ring.on_event() (serialized) once event_fd() is readable; the
        // wait keeps `ring` alive.
        virtual void wait_event(const std::shared_ptr<event_ring>& ring) = 0;
    };

    // Creates the ring (`depth` reads in flight) and its eventfd. Throws
    // ringsafe::error (system_category) when io_uring or eventfd fail.
    explicit event_ring(unsigned depth);
    // Cancels and waits (blocking) for operations still in flight, which
    // only happens when the io_context was stopped with operations outstanding.
    ~event_ring();
    event_ring(const event_ring&) = delete;
    event_ring& operator=(const event_ring&) = delete;

    // The eventfd signalled on every completion (owned by the ring).
    int event_fd() const noexcept { return event_fd_; }
    // Installs the driver; before the first start() or submit_single().
    void set_driver(std::unique_ptr<driver> d) { driver_ = std::move(d); }
    // The driver's wake-up: reaps what completed and submits what waits.
    void on_event();
    // The event loop is going away (the driver's io_context is destroyed):
    // cancels and waits (blocking) for every operation the kernel owns,
    // closes the ring and its eventfd, and destroys every callback not yet
    // run (jobs' on_done, singles' done) without running it, which frees
    // what they hold. The ring does nothing afterwards. Idempotent.
    void shutdown();

    // Whether O_DIRECT reads with these alignments can run here (the slots'
    // bounce buffers are bounce_size bytes aligned to bounce_align).
    static bool fits_direct(std::uint32_t align, std::uint32_t mem_align) noexcept;

    // Queues a job's ops; they are submitted as ring slots free up.
    void start(std::shared_ptr<file_job> job);
    // Stops a job: nothing more is submitted, its in-flight reads get
    // IORING_OP_ASYNC_CANCEL; on_done runs once every one of them completed.
    void cancel(file_job& job);

    // Single operations besides the reads (async_open's openat and header
    // reads): `done` is deferred to the driver with the operation's result
    // (-errno on failure; -EIO when the ring failed). At most `depth` of them
    // are in flight at once (so that the completion queue never overflows);
    // more wait, in order, until completions make room. Each returns an id
    // for cancel_single().
    //
    // openat(AT_FDCWD, *path, flags): `done` gets the descriptor; one that
    // never reaches `done` (the ring shut down or destroyed first) is closed
    // by the ring. The ring holds `path` until then.
    std::uint64_t submit_openat(std::shared_ptr<const std::string> path, int flags, std::function<void(int)> done);
    // read(2) of `len` bytes at `offset` of `fd` into `to`, which must stay
    // valid until `done` is deferred or the ring is gone.
    std::uint64_t submit_read(int fd, std::byte* to, unsigned len, std::uint64_t offset,
                              std::function<void(int)> done);
    // IORING_OP_ASYNC_CANCEL for a single operation still in flight (its done
    // still runs, with -ECANCELED or the result it got first); one still
    // waiting for room completes with -ECANCELED without being submitted.
    void cancel_single(std::uint64_t id);

private:
    struct single {
        std::shared_ptr<const void> keep;
        std::function<void(int)> done;
        bool result_is_fd = false;
    };
    // A single operation waiting for room in the ring.
    struct waiting_single {
        std::uint64_t id = 0;
        std::function<void(io_uring_sqe*)> prep;
        single op;
    };
    struct slot {
        std::shared_ptr<file_job> job;  // null when free
        std::size_t op = 0;
        std::uint64_t pos = 0;           // next file offset of this op to read
        std::uint32_t generation = 0;    // tells reuses of the slot apart
        unsigned retries = 0;
        // The read in flight: where it starts in the file, its length, and
        // whether it targets the slot's bounce buffer (O_DIRECT pieces that
        // cannot land in the caller's buffer) instead of the caller's buffer.
        std::uint64_t read_at = 0;
        std::uint64_t read_len = 0;
        bool bounced = false;
    };
    struct free_deleter {
        void operator()(std::byte* p) const noexcept { std::free(p); }
    };
    static constexpr std::size_t bounce_size = std::size_t{1} << 20;
    static constexpr std::size_t bounce_align = 4096;

    void pump();
    void submit_read(unsigned id);
    std::byte* place_direct(unsigned id);
    static std::uint64_t wanted_bytes(const slot& s, const read_op& op, int res);
    void flush();
    void arm();
    void on_ready();
    void handle(unsigned id, int res);
    void fail(file_job& job, std::error_code ec, std::string message);
    void finish_if_idle(file_job& job);
    void fail_everything(std::error_code ec, const std::string& what);
    // A single operation: `prep` fills the SQE (when it is submitted); `keep`
    // (the memory the kernel uses) lives until `done` is deferred, or until
    // the ring is gone; `result_is_fd`: see submit_openat.
    std::uint64_t submit_single(const std::function<void(io_uring_sqe*)>& prep, std::shared_ptr<const void> keep,
                                std::function<void(int)> done, bool result_is_fd = false);
    void submit_waiting_singles();
    void reap();
    void close_ring() noexcept;
    void defer(std::function<void()> fn);
    void deliver(single& s, int res);

    std::unique_ptr<io_uring> ring_;  // liburing's ring (allocated with the ring)
    bool ring_ok_ = false;
    int event_fd_ = -1;
    std::unique_ptr<driver> driver_;
    std::vector<slot> slots_;
    // One per slot, allocated when the slot first serves an O_DIRECT job;
    // freed only after the ring is gone (the kernel may still write into it).
    std::vector<std::unique_ptr<std::byte, free_deleter>> bounces_;
    std::vector<unsigned> free_;
    std::deque<std::shared_ptr<file_job>> queue_;  // jobs with ops left to submit
    unsigned in_flight_ = 0;  // reads owned by the kernel (cancels are not counted)
    bool armed_ = false;
    std::error_code broken_;  // the ring failed; later jobs fail at once
    std::map<std::uint64_t, single> singles_;  // in flight, by user_data
    std::deque<waiting_single> waiting_singles_;  // beyond `depth` in flight, in submission order
    std::uint64_t next_single_ = 0;
    std::vector<std::shared_ptr<const void>> orphaned_;  // singles' memory after a ring failure, freed with the ring
};

}  // namespace ringsafe::uring
