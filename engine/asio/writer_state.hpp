// What an async_writer holds (engine-internal): the writer, the strand of the
// caller's executor that serializes its operations, the eventfd that the
// writer's ring signals, and the queue of operations in initiation order.
#pragma once

#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/strand.hpp>

#include "ringsafe/asio.hpp"
#include "write/stream_writer.hpp"

namespace ringsafe::asio {

namespace detail {

// One async_write or async_finish. step() runs on the strand whenever the
// operation is at the head of the queue and may progress; it returns true
// once done (n set) and false while it waits for ring completions (or the
// blocking pool). It throws the writer's errors.
struct writer_op {
    virtual ~writer_op() = default;
    virtual bool step(async_writer::impl& w) = 0;
    // Whether a cancellation still stops the operation (and abandons the
    // file); false once async_finish has submitted the rename / link.
    virtual bool cancellable() const noexcept { return true; }
    // The status message of a cancelled operation (names the path).
    virtual std::string cancelled_message(const ringsafe::writer::impl& c) const = 0;

    status* st = nullptr;
    boost::asio::any_io_executor done_ex;
    // Optional so that it is only ever move-constructed: Boost 1.81's
    // any_completion_handler move assignment recurses forever.
    std::optional<io_handler> handler;
    std::size_t n = 0;
    // Set once validation passed: an error after this point abandons the file.
    bool abandons_on_error = false;
    // A failed operation completes only after the ring is idle and the file
    // abandoned (nothing at the target when the handler runs).
    bool failed = false;
    std::error_code ec;
    std::string message;
    // The handler's cancellation slot, and the request its handler sets on
    // the strand (shared: the request may arrive after the operation is gone).
    boost::asio::cancellation_slot slot;
    std::shared_ptr<bool> cancel_requested;
    bool aborted = false;  // completes with operation_aborted
};

}  // namespace detail

struct async_writer::impl : std::enable_shared_from_this<async_writer::impl> {
    impl(executor_type ex, writer w);

    // Shared with a blocking-pool task running an offloaded step, which may
    // outlive this state (the io_context destroyed meanwhile).
    std::shared_ptr<writer> wr;
    ringsafe::writer::impl& core;  // wr's engine
    boost::asio::strand<executor_type> strand;
    boost::asio::posix::stream_descriptor event;  // eventfd registered with core.stream's ring
    std::deque<std::unique_ptr<detail::writer_op>> queue;
    bool armed = false;            // an async_wait on `event` is outstanding
    bool offloaded = false;        // the head operation runs on the blocking pool: hands off the engine
    bool abandon_requested = false;  // the async_writer was destroyed
    std::exception_ptr ring_error;   // reaping failed (the ring refused a resubmission)

    // All on the strand.
    void push(std::unique_ptr<detail::writer_op> op);
    void pump();
    void arm();
    // Writes (or one-shot operations) still owned by the ring.
    bool ring_busy() const noexcept { return core.stream && core.stream->busy() > 0; }
    // Runs `work` on the writer's engine on the blocking pool, then pump()
    // again on the strand with `done` given its exception (null on success).
    // `work` must hold nothing of this state: it may outlive it. When the
    // io_context is destroyed meanwhile, `done` goes with it, never run.
    void offload(std::function<void(ringsafe::writer::impl&)> work, std::function<void(std::exception_ptr)> done);

private:
    void on_event();
    void complete(detail::writer_op& op);
};

}  // namespace ringsafe::asio
