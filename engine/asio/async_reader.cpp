// async_reader: binding a reader to an executor and a ring.
#include <boost/asio/post.hpp>

#include "asio/read_operation.hpp"
#include "asio/reader_state.hpp"

namespace ringsafe::asio {

async_reader::impl::impl(executor_type ex, reader r, const async_options& opts)
    : rd(std::move(r)), strand(boost::asio::make_strand(ex)),
      ring(detail::make_event_ring(strand, opts.queue_depth)) {}

async_reader::impl::impl(detail::engine_strand s, std::shared_ptr<uring::event_ring> rg, reader r)
    : rd(std::move(r)), strand(std::move(s)), ring(std::move(rg)) {}

async_reader::async_reader(executor_type ex, reader r, const async_options& opts)
    : ex_(ex), impl_(std::make_shared<impl>(ex, std::move(r), opts)) {}

async_reader::async_reader(executor_type ex, std::shared_ptr<impl> state) noexcept
    : ex_(std::move(ex)), impl_(std::move(state)) {}

async_reader::async_reader(async_reader&&) noexcept = default;

async_reader& async_reader::operator=(async_reader&& o) noexcept {
    if (this != &o) {
        cancel();
        ex_ = std::move(o.ex_);
        impl_ = std::move(o.impl_);
    }
    return *this;
}

async_reader::~async_reader() { cancel(); }

reader& async_reader::get() noexcept { return impl_->rd; }
const reader& async_reader::get() const noexcept { return impl_->rd; }

void async_reader::cancel() {
    if (!impl_ || impl_->outstanding.load() == 0) return;
    boost::asio::post(impl_->strand, [s = impl_] {
        auto ops = s->active;  // cancel() may complete and erase them
        for (auto& w : ops)
            if (auto op = w.lock()) op->cancel();
    });
}

}  // namespace ringsafe::asio
