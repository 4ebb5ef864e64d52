#include "http/fetch_run.hpp"

#include <algorithm>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

#include "ringsafe/error.hpp"

namespace ringsafe::http {

fetch_run::fetch_run(remote_object object, connection_pool& pool, const http_options& opts, std::uint32_t seed,
                     std::span<const read_op> ops, detail::async_callbacks cb)
    : object_(std::move(object)), pool_(pool), opts_(opts), rng_(seed), ops_(ops), cb_(std::move(cb)) {}

void fetch_run::start(net::any_io_executor ex, std::uint64_t size, const std::string& name) {
    try {
        work_ = split_into_pieces(ops_, size, name, opts_, cb_.describe);
    } catch (const error& e) {
        ec_ = e.code();
        message_ = e.what();
    }
    const std::size_t workers = ec_ ? 0 : std::min<std::size_t>(opts_.connections_per_origin, work_.size());
    if (workers == 0) {
        done_ = true;
        net::post(ex, [self = shared_from_this()] { self->cb_.on_done(self->ec_, self->message_, false); });
        return;
    }
    workers_ = static_cast<unsigned>(workers);
    for (std::size_t w = 0; w < workers; ++w)
        net::co_spawn(ex, worker(), net::bind_executor(ex, [self = shared_from_this()](std::exception_ptr e) {
                           self->worker_ended(e);
                       }));
}

void fetch_run::cancel() {
    if (done_ || cancelled_) return;
    cancelled_ = true;
    abandon_.abandon();
}

net::awaitable<void> fetch_run::worker() {
    auto stop = [this] { return abandon_.abandoned(); };
    while (!work_.empty() && !abandon_.abandoned()) {
        const piece p = work_.front();
        work_.pop_front();
        std::function<void(std::uint64_t)> progress;
        if (cb_.on_bytes) progress = [this, i = p.op_index](std::uint64_t n) { cb_.on_bytes(i, n); };
        try {
            co_await fetch_range(fetch_context{object_, pool_, opts_, rng_, &abandon_}, p.offset, p.length, p.dst,
                                 progress, stop);
        } catch (const error& e) {
            fail(e.code(), op_label(cb_.describe, ops_[p.op_index]) + e.what());
        } catch (const std::exception& e) {
            fail(make_error_code(errc::IoError), op_label(cb_.describe, ops_[p.op_index]) + e.what());
        }
    }
}

void fetch_run::fail(std::error_code ec, std::string message) {
    if (abandon_.abandoned()) return;  // a consequence of the cancel or of the first error
    ec_ = ec;
    message_ = std::move(message);
    abandon_.abandon();  // the other requests stop at once
}

void fetch_run::worker_ended(std::exception_ptr e) {
    if (e) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& x) {
            fail(make_error_code(errc::IoError), x.what());
        } catch (...) {
            fail(make_error_code(errc::IoError), "unknown failure");
        }
    }
    if (--workers_ > 0) return;
    done_ = true;
    cb_.on_done(ec_, message_, cancelled_);
}

}  // namespace ringsafe::http
