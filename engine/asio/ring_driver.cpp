// ring_driver: the event ring's eventfd watched by an Asio descriptor; the
// rings of each execution context shut down with it (context_life.cpp).
#include "asio/ring_driver.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>

#include "asio/context_life.hpp"

namespace ringsafe::asio::detail {
namespace {

class strand_driver final : public uring::event_ring::driver {
public:
    strand_driver(engine_strand strand, int efd) : strand_(std::move(strand)), event_(strand_, efd) {}
    // The ring owns (and closes) the eventfd.
    ~strand_driver() override { event_.release(); }

    void defer(std::function<void()> fn) override { boost::asio::post(strand_, std::move(fn)); }

    void wait_event(const std::shared_ptr<uring::event_ring>& ring) override {
        event_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                          boost::asio::bind_executor(strand_, [ring](boost::system::error_code) { ring->on_event(); }));
    }

private:
    engine_strand strand_;
    boost::asio::posix::stream_descriptor event_;
};

}  // namespace

std::shared_ptr<uring::event_ring> make_event_ring(const engine_strand& strand, unsigned depth) {
    auto& ctx = boost::asio::query(strand.get_inner_executor(), boost::asio::execution::context);
    auto ring = std::make_shared<uring::event_ring>(depth);
    ring->set_driver(std::make_unique<strand_driver>(strand, ring->event_fd()));
    shut_down_with(ctx, ring);
    return ring;
}

}  // namespace ringsafe::asio::detail
