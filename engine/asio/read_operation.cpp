// read_operation: one async_read from initiation to the handler.
#include "asio/read_operation.hpp"

#include <mutex>

#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>

#include "asio/blocking_pool.hpp"
#include "asio/context_life.hpp"
#include "asio/reader_access.hpp"
#include "format/error_context.hpp"
#include "read/op_description.hpp"

namespace ringsafe::asio::detail {

read_operation::read_operation(std::shared_ptr<async_reader::impl> owner, read_plan plan, read_callbacks cb,
                               status* st, boost::asio::any_io_executor done_ex, io_handler handler)
    : owner_(std::move(owner)), plan_(std::move(plan)), cb_(std::move(cb)), st_(st), done_ex_(std::move(done_ex)),
      work_(done_ex_), handler_(std::move(handler)),
      slot_(boost::asio::get_associated_cancellation_slot(handler_)) {
    progress_wanted_ = cb_.on_progress || cb_.on_tensor_done;
}

void read_operation::run() {
    owner_->active.insert(shared_from_this());
    reader::impl& r = ringsafe::detail::reader_access::of(owner_->rd);
    const ringsafe::detail::plan_data* d = plan_.data();
    if (!d) return complete();
    if (d->reader_id != r.id)
        return fail_now(make_error_code(errc::InvalidArgument),
                        "the plan was made by another reader than the one for " + r.spec);
    if (slot_.is_connected()) {
        slot_.assign([w = weak_from_this(), strand = owner_->strand](boost::asio::cancellation_type t) {
            using ct = boost::asio::cancellation_type;
            if ((t & (ct::terminal | ct::partial | ct::total)) == ct::none) return;
            boost::asio::post(strand, [w] {
                if (auto op = w.lock()) op->cancel();
            });
        });
    }
    progress_.emplace(*d, r.tensors, std::move(cb_));
    progress_->start();
    pending_ = static_cast<unsigned>(d->shards.size());
    if (pending_ == 0) return complete();
    for (std::size_t e = 0; e < d->shards.size(); ++e) {
        source& src = *r.io[d->shards[e].shard]->src;
        auto* async = dynamic_cast<ringsafe::detail::async_source*>(&src);
        if (async && async->can_start_async())
            start_async_shard(e, *async);
        else
            start_pool_shard(e);
    }
}

void read_operation::start_async_shard(std::size_t entry, ringsafe::detail::async_source& src) {
    ringsafe::detail::async_callbacks c;
    // The run (kept by runs_ until completion) holds only on_done's reference
    // to the operation, so that the two do not keep each other alive.
    auto landed = std::make_shared<std::uint64_t>(0);
    c.on_bytes = [this, entry, landed](std::size_t op, std::uint64_t n) {
        *landed += n;
        progress_->landed(entry, op, n);
    };
    c.describe = [this, entry](std::uint32_t tag) { return describe(entry, tag); };
    c.on_stopped_bytes = [landed](std::uint64_t n) { *landed += n; };
    c.on_done = [self = shared_from_this(), landed](std::error_code ec, std::string msg, bool cancelled) {
        self->shard_done(ec, std::move(msg), *landed, cancelled);
    };
    runs_.push_back(src.start_async({owner_->strand, owner_->ring}, plan_.data()->shards[entry].ops, std::move(c)));
}

// The pool task holds only what is free of the io_context: its shard's source,
// the plan and the cancel flag. The operation (its strand, handler, executors)
// is parked with the io_context meanwhile (context_life.hpp): progress and the
// shard's end reach the strand only while the io_context is alive; once it is
// gone, the task ends without posting and the operation went with it.
void read_operation::start_pool_shard(std::size_t entry) {
    if (!pool_cancel_) pool_cancel_ = std::make_shared<std::atomic<bool>>(cancelled_);
    using parked = std::shared_ptr<read_operation>;
    auto life = life_of(boost::asio::query(owner_->strand.get_inner_executor(), boost::asio::execution::context));
    const context_life::ticket t = life->park(shared_from_this());
    const reader::impl& r = ringsafe::detail::reader_access::of(owner_->rd);
    std::shared_ptr<reader::impl::shard_io> io = r.io[plan_.data()->shards[entry].shard];
    boost::asio::post(blocking_pool(), [life = std::move(life), t, io = std::move(io), plan = plan_, entry,
                                        cancel = pool_cancel_, progress = progress_wanted_] {
        const auto& so = plan.data()->shards[entry];
        std::atomic<std::uint64_t> landed{0};
        io_control c;
        c.cancel = cancel.get();
        c.on_bytes = [&landed, &life, t, entry, progress](std::size_t op, std::uint64_t n) {
            landed.fetch_add(n, std::memory_order_relaxed);
            // Progress is reported on the strand, in order, before shard_done.
            if (progress)
                life->visit<parked>(t, [&](const parked& self) {
                    boost::asio::post(self->owner_->strand,
                                      [self, entry, op, n] { self->progress_->landed(entry, op, n); });
                });
        };
        // Nobody reads the message once the io_context is gone.
        c.describe = [&life, t, entry](std::uint32_t tag) {
            std::string out = "op tag " + std::to_string(tag);
            life->visit<parked>(t, [&](const parked& self) { out = self->describe(entry, tag); });
            return out;
        };
        std::error_code ec;
        std::string msg;
        try {
            std::lock_guard lock(io->busy);
            io->src->execute(so.ops, c);
        } catch (const std::system_error& e) {
            ec = e.code();
            msg = ringsafe::format::bare_message(e);
        } catch (const std::exception& e) {
            ec = make_error_code(errc::IoError);
            msg = io->src->name() + ": " + e.what();
        }
        const bool cancelled = ec == make_error_code(errc::Cancelled);
        life->claim<parked>(t, [&](parked self) {
            auto strand = self->owner_->strand;
            boost::asio::post(strand, [self = std::move(self), ec, msg = std::move(msg), n = landed.load(),
                                       cancelled] { self->shard_done(ec, msg, n, cancelled); });
        });
    });
}

void read_operation::cancel() {
    if (completed_ || cancelled_) return;
    cancelled_ = true;
    stop_shards();
}

void read_operation::stop_shards() {
    if (progress_) progress_->stop();
    if (pool_cancel_) pool_cancel_->store(true);
    auto runs = runs_;  // a run's cancel may complete it
    for (auto& r : runs) r->cancel();
}

void read_operation::fail_now(std::error_code ec, std::string message) {
    ec_ = ec;
    message_ = std::move(message);
    complete();
}

void read_operation::shard_done(std::error_code ec, std::string message, std::uint64_t landed, bool cancelled) {
    landed_ += landed;
    if (ec && !cancelled && !ec_) {
        ec_ = ec;
        message_ = std::move(message);
        // One shard failed: stop the others (their reads drain first).
        stop_shards();
    }
    if (--pending_ == 0) complete();
}

void read_operation::complete() {
    if (completed_) return;
    completed_ = true;
    error_code ec = ec_;
    std::string msg = message_;
    reader::impl& r = ringsafe::detail::reader_access::of(owner_->rd);
    if (cancelled_ && !ec) {
        ec = boost::asio::error::operation_aborted;
        msg = "reading " + r.spec + " was cancelled";
    } else if (!ec && plan_.data() && landed_ != plan_.data()->total_bytes) {
        ec = make_error_code(errc::IoError);
        msg = "reading " + r.spec + ": the executor reported " + std::to_string(landed_) + " of " +
              std::to_string(plan_.data()->total_bytes) + " bytes";
    }
    if (st_) {
        st_->code = static_cast<std::error_code>(ec);
        st_->message = ec ? msg : std::string();
    }
    if (slot_.is_connected()) slot_.clear();
    runs_.clear();
    auto self = shared_from_this();
    owner_->active.erase(std::weak_ptr<read_operation>(self));
    --owner_->outstanding;
    boost::asio::post(done_ex_, boost::asio::append(std::move(handler_), ec, static_cast<std::size_t>(landed_)));
    work_.reset();
}

std::string read_operation::describe(std::size_t entry, std::uint32_t op) const {
    const reader::impl& r = ringsafe::detail::reader_access::of(owner_->rd);
    std::string out = ringsafe::read::describe_op(*plan_.data(), r.tensors, entry, op);
    return out.empty() ? "op tag " + std::to_string(op) : out;
}

// --- entry points -----------------------------------------------------------

void start_read(const std::shared_ptr<async_reader::impl>& r, read_plan plan, read_callbacks cb, status* st,
                boost::asio::any_io_executor done_ex, io_handler handler) {
    if (!r) {
        if (st) *st = status{make_error_code(errc::InvalidArgument), "async_read on an empty async_reader"};
        boost::asio::post(done_ex, boost::asio::append(std::move(handler),
                                                        error_code(make_error_code(errc::InvalidArgument)),
                                                        std::size_t{0}));
        return;
    }
    ++r->outstanding;
    auto op = std::make_shared<read_operation>(r, std::move(plan), std::move(cb), st, std::move(done_ex),
                                               std::move(handler));
    boost::asio::post(r->strand, [op] { op->run(); });
}

void start_read(const std::shared_ptr<async_reader::impl>& r, selection sel,
                std::vector<std::span<std::byte>> dsts, read_callbacks cb, status* st,
                boost::asio::any_io_executor done_ex, io_handler handler) {
    read_plan plan;
    std::error_code ec;
    std::string msg;
    if (r) {
        try {
            std::vector<std::span<std::byte>> spans(dsts.begin(), dsts.end());
            plan = r->rd.plan(sel, std::span<const std::span<std::byte>>(spans));
        } catch (const std::system_error& e) {
            ec = e.code();
            msg = ringsafe::format::bare_message(e);
        }
    }
    if (!ec) return start_read(r, std::move(plan), std::move(cb), st, std::move(done_ex), std::move(handler));
    ++r->outstanding;
    auto op = std::make_shared<read_operation>(r, read_plan{}, read_callbacks{}, st, std::move(done_ex),
                                               std::move(handler));
    boost::asio::post(r->strand, [op, ec, msg] {
        op->fail_now(ec, msg);
    });
}

}  // namespace ringsafe::asio::detail
