// context_life: what the blocking pool parks with an execution context, and
// the context's registry (a service) that shuts its rings and that life down.
#include "asio/context_life.hpp"

#include <vector>

namespace ringsafe::asio::detail {

void context_life::shut_down() {
    parked_map parked;
    {
        std::lock_guard lock(mutex_);
        alive_ = false;
        parked.swap(parked_);
    }
    // Destroyed without the lock: a handler's destruction may release anything.
}

namespace {

// The rings made for one execution context, and its life. An operation
// waiting on a ring is held by the ring (its callback holds the operation's
// handler, which holds what holds the ring), not by the io_context: when the
// io_context is destroyed with such operations pending, this service's
// shutdown breaks those cycles (event_ring::shutdown), so that the rings,
// their eventfds and the handlers are freed, and no handler runs. Work on the
// blocking pool learns of the shutdown through the life (context_life.hpp).
class context_registry final : public boost::asio::execution_context::service {
public:
    static boost::asio::execution_context::id id;

    explicit context_registry(boost::asio::execution_context& ctx)
        : service(ctx), life_(std::make_shared<context_life>()) {}

    void add(const std::shared_ptr<uring::event_ring>& ring) {
        std::lock_guard lock(mutex_);
        std::erase_if(rings_, [](const std::weak_ptr<uring::event_ring>& w) { return w.expired(); });
        rings_.push_back(ring);
    }

    const std::shared_ptr<context_life>& life() const noexcept { return life_; }

private:
    void shutdown() override {
        // First the pool's view: a pool thread done from here on posts nothing.
        life_->shut_down();
        std::vector<std::weak_ptr<uring::event_ring>> rings;
        {
            std::lock_guard lock(mutex_);
            rings.swap(rings_);
        }
        for (auto& w : rings)
            if (auto ring = w.lock()) ring->shutdown();
    }

    std::shared_ptr<context_life> life_;
    std::mutex mutex_;
    std::vector<std::weak_ptr<uring::event_ring>> rings_;
};

boost::asio::execution_context::id context_registry::id;

}  // namespace

std::shared_ptr<context_life> life_of(boost::asio::execution_context& ctx) {
    return boost::asio::use_service<context_registry>(ctx).life();
}

void shut_down_with(boost::asio::execution_context& ctx, const std::shared_ptr<uring::event_ring>& ring) {
    boost::asio::use_service<context_registry>(ctx).add(ring);
}

}  // namespace ringsafe::asio::detail
