// ring_driver: the event ring's eventfd watched by an Asio descriptor, and
// the rings of each execution context shut down with it.
#include "asio/ring_driver.hpp"

#include <mutex>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>

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

// The rings made for one execution context. An operation waiting on a ring
// is held by the ring (its callback holds the operation's handler, which
// holds what holds the ring), not by the io_context: when the io_context is
// destroyed with such operations pending, this service's shutdown breaks
// those cycles (event_ring::shutdown), so that the rings, their eventfds and
// the handlers are freed, and no handler runs.
class ring_registry final : public boost::asio::execution_context::service {
public:
    static boost::asio::execution_context::id id;

    explicit ring_registry(boost::asio::execution_context& ctx) : service(ctx) {}

    void add(const std::shared_ptr<uring::event_ring>& ring) {
        std::lock_guard lock(mutex_);
        std::erase_if(rings_, [](const std::weak_ptr<uring::event_ring>& w) { return w.expired(); });
        rings_.push_back(ring);
    }

private:
    void shutdown() override {
        std::vector<std::weak_ptr<uring::event_ring>> rings;
        {
            std::lock_guard lock(mutex_);
            rings.swap(rings_);
        }
        for (auto& w : rings)
            if (auto ring = w.lock()) ring->shutdown();
    }

    std::mutex mutex_;
    std::vector<std::weak_ptr<uring::event_ring>> rings_;
};

boost::asio::execution_context::id ring_registry::id;

}  // namespace

std::shared_ptr<uring::event_ring> make_event_ring(const engine_strand& strand, unsigned depth) {
    auto& ctx = boost::asio::query(strand.get_inner_executor(), boost::asio::execution::context);
    auto& registry = boost::asio::use_service<ring_registry>(ctx);
    auto ring = std::make_shared<uring::event_ring>(depth);
    ring->set_driver(std::make_unique<strand_driver>(strand, ring->event_fd()));
    registry.add(ring);
    return ring;
}

}  // namespace ringsafe::asio::detail
