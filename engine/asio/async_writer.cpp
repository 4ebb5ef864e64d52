// async_writer: the streaming writer driven from a strand of the caller's
// executor. Bytes go out through the writer's own ring (its data_stream);
// the ring signals an eventfd on every completion and an Asio descriptor
// watching it wakes the strand, which reaps and resumes the operation at the
// head of the queue. No thread of ringsafe's own, no blocking wait.
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>

#include "asio/blocking_pool.hpp"
#include "asio/context_life.hpp"
#include "asio/writer_access.hpp"
#include "asio/writer_ops.hpp"
#include "asio/writer_state.hpp"
#include "format/error_context.hpp"
#include "uring/eventfd.hpp"

namespace ringsafe::asio {
namespace {

ringsafe::writer::impl& engine_of(writer& w) {
    auto* p = ringsafe::detail::writer_access::of(w);
    if (!p) raise(errc::InvalidArgument, "async_writer: the writer is empty (moved from)");
    return *p;
}

}  // namespace

async_writer::impl::impl(executor_type ex, writer w)
    : wr(std::make_shared<writer>(std::move(w))), core(engine_of(*wr)), strand(boost::asio::make_strand(ex)),
      event(strand) {
    const int efd = uring::open_eventfd("ringsafe async writer");
    event.assign(efd);
    if (core.stream) core.stream->ring().attach_eventfd(efd);
}

void async_writer::impl::push(std::unique_ptr<detail::writer_op> op) {
    queue.push_back(std::move(op));
    if (queue.size() == 1) pump();  // otherwise the head operation pumps when it is done
}

void async_writer::impl::arm() {
    if (armed) return;
    armed = true;
    event.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     boost::asio::bind_executor(strand, [self = shared_from_this()](const error_code& ec) {
                         self->armed = false;
                         if (!ec) self->on_event();
                     }));
}

void async_writer::impl::on_event() {
    // Reset the counter before reaping: a completion posted after this read
    // makes the descriptor ready again, so none is missed.
    uring::consume_eventfd(event.native_handle());
    if (!offloaded && core.stream) {
        try {
            core.stream->ring().reap_ready();
        } catch (...) {
            ring_error = std::current_exception();
        }
    }
    pump();
}

void async_writer::impl::pump() {
    while (!offloaded && !queue.empty()) {
        detail::writer_op& op = *queue.front();
        bool done = false;
        // A cancelled operation abandons a live writer instead of progressing
        // (an operation queued behind others is cancelled once it is at the head).
        if (!op.failed && op.cancel_requested && *op.cancel_requested && !core.finished && !core.dead &&
            op.cancellable()) {
            op.failed = true;
            op.aborted = true;
            op.abandons_on_error = true;
            op.message = op.cancelled_message(core);
        }
        if (!op.failed) {
            try {
                if (ring_error) {
                    op.abandons_on_error = true;
                    std::rethrow_exception(std::exchange(ring_error, nullptr));
                }
                done = op.step(*this);
            } catch (const std::system_error& e) {
                op.failed = true;
                op.ec = e.code();
                op.message = ringsafe::format::bare_message(e);
            } catch (const std::exception& e) {
                op.failed = true;
                op.ec = make_error_code(errc::IoError);
                op.message = e.what();
            }
            if (offloaded) return;
        }
        if (op.failed) {
            // Abandon only once the kernel holds none of the writer's memory,
            // so that abandoning never waits on the disk.
            if (op.abandons_on_error) {
                if (ring_busy()) return arm();
                wr->abandon();
            }
            done = true;
        }
        if (!done) return arm();
        complete(op);
        queue.pop_front();
    }
    if (!offloaded && queue.empty() && abandon_requested && !core.finished && !core.dead) {
        if (ring_busy()) return arm();
        wr->abandon();
    }
}

void async_writer::impl::complete(detail::writer_op& op) {
    const error_code ec = op.aborted ? error_code(boost::asio::error::operation_aborted) : error_code(op.ec);
    if (op.st) {
        op.st->code = static_cast<std::error_code>(ec);
        op.st->message = op.message;
    }
    if (op.slot.is_connected()) op.slot.clear();  // a later emit reaches nothing
    boost::asio::post(op.done_ex, boost::asio::append(std::move(*op.handler), ec, op.failed ? std::size_t{0} : op.n));
}

namespace {
// What an offloaded step holds of the io_context, parked with it
// (detail::context_life) while the step runs on the blocking pool.
struct offload_completion {
    std::shared_ptr<async_writer::impl> self;
    std::function<void(std::exception_ptr)> done;
    boost::asio::executor_work_guard<async_writer::executor_type> work;  // io_context::run() keeps going
};
}  // namespace

void async_writer::impl::offload(std::function<void(ringsafe::writer::impl&)> work,
                                 std::function<void(std::exception_ptr)> done) {
    offloaded = true;
    auto life = detail::life_of(boost::asio::query(strand.get_inner_executor(), boost::asio::execution::context));
    auto guard = boost::asio::make_work_guard(strand.get_inner_executor());
    const detail::context_life::ticket t =
        life->park(offload_completion{shared_from_this(), std::move(done), std::move(guard)});
    // The task holds the writer's engine, not this state: when the io_context
    // is destroyed meanwhile, the state goes with it, and the engine (the
    // file abandoned) goes here once the step is done.
    boost::asio::post(detail::blocking_pool(), [life = std::move(life), t, engine = wr, work = std::move(work)] {
        std::exception_ptr e;
        try {
            detail::run_offload_hook();
            work(engine_of(*engine));
        } catch (...) {
            e = std::current_exception();
        }
        life->claim<offload_completion>(t, [&](offload_completion c) {
            auto strand = c.self->strand;
            boost::asio::post(strand, [self = std::move(c.self), done = std::move(c.done), e] {
                self->offloaded = false;
                done(e);
                self->pump();
            });
            c.work.reset();
        });
    });
}

async_writer::async_writer(executor_type ex, writer w) : ex_(ex), impl_(std::make_shared<impl>(ex, std::move(w))) {}
async_writer::async_writer(async_writer&&) noexcept = default;

namespace {
// Without a finish, the file goes once the operations initiated so far have run.
void request_abandon(const std::shared_ptr<async_writer::impl>& s) {
    if (!s) return;
    boost::asio::post(s->strand, [s] {
        s->abandon_requested = true;
        s->pump();
    });
}
}  // namespace

async_writer& async_writer::operator=(async_writer&& o) noexcept {
    if (this != &o) {
        request_abandon(impl_);
        ex_ = std::move(o.ex_);
        impl_ = std::move(o.impl_);
    }
    return *this;
}

async_writer::~async_writer() { request_abandon(impl_); }

writer& async_writer::get() noexcept { return *impl_->wr; }

namespace detail {
namespace {

void run(const std::shared_ptr<async_writer::impl>& w, std::unique_ptr<writer_op> op, status* st,
         boost::asio::any_io_executor done_ex, io_handler handler) {
    if (!w) {
        if (st) *st = status{make_error_code(errc::InvalidArgument), "operation on an empty async_writer"};
        boost::asio::post(done_ex, boost::asio::append(std::move(handler),
                                                        error_code(make_error_code(errc::InvalidArgument)),
                                                        std::size_t{0}));
        return;
    }
    op->st = st;
    op->done_ex = std::move(done_ex);
    op->handler.emplace(std::move(handler));
    // Installed here, not on the strand, so that a cancellation emitted right
    // after the initiating call is seen. Every cancellation type abandons.
    op->slot = boost::asio::get_associated_cancellation_slot(*op->handler);
    if (op->slot.is_connected()) {
        op->cancel_requested = std::make_shared<bool>(false);
        op->slot.assign([flag = op->cancel_requested, weak = std::weak_ptr<async_writer::impl>(w),
                         strand = w->strand](boost::asio::cancellation_type t) {
            using ct = boost::asio::cancellation_type;
            if ((t & (ct::terminal | ct::partial | ct::total)) == ct::none) return;
            boost::asio::post(strand, [flag, weak] {
                *flag = true;
                if (auto s = weak.lock()) s->pump();
            });
        });
    }
    boost::asio::post(w->strand, [w, op = std::move(op)]() mutable { w->push(std::move(op)); });
}

}  // namespace

void start_write(const std::shared_ptr<async_writer::impl>& w, write_args args, status* st,
                 boost::asio::any_io_executor done_ex, io_handler handler) {
    run(w, make_write_op(std::move(args)), st, std::move(done_ex), std::move(handler));
}

void start_finish(const std::shared_ptr<async_writer::impl>& w, std::optional<metadata_map> metadata, status* st,
                  boost::asio::any_io_executor done_ex, io_handler handler) {
    run(w, make_finish_op(std::move(metadata)), st, std::move(done_ex), std::move(handler));
}

}  // namespace detail
}  // namespace ringsafe::asio
