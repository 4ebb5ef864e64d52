// Each execution context's registry (engine-internal): the event rings made
// for it, shut down with it, and its life as the blocking pool sees it. Work
// on the pool parks what it holds of the context (its handler, executors,
// strands, work count) here while it runs, and takes that back to post its
// completion only while the context is alive. Destroying the context destroys
// what is parked, on the destroying thread, unrun: the pool thread then never
// posts and never touches the context's executors.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include <boost/asio/execution_context.hpp>

#include "uring/event_ring.hpp"

namespace ringsafe::asio::detail {

class context_life {
public:
    using ticket = std::uint64_t;

    // Parks `value` with the context; returns its ticket (0 when the context
    // is already shut down: `value` is destroyed here).
    template <class T>
    ticket park(T value) {
        std::lock_guard lock(mutex_);
        if (!alive_) return 0;
        const ticket t = next_++;
        parked_.emplace(t, std::make_unique<held_as<T>>(std::move(value)));
        return t;
    }

    // Runs fn(T&) on the value parked as `t` with the lock held, so that the
    // context cannot shut down meanwhile and fn may post to it. False (fn not
    // run) once the context is gone.
    template <class T, class F>
    bool visit(ticket t, F&& fn) {
        std::lock_guard lock(mutex_);
        auto it = find(t);
        if (it == parked_.end()) return false;
        std::forward<F>(fn)(static_cast<held_as<T>&>(*it->second).value);
        return true;
    }

    // Takes the value parked as `t` out and runs fn(T&&) with the lock held
    // (fn posts it, or lets it go while the context still exists). False
    // (fn not run) once the context is gone: the value went with it.
    template <class T, class F>
    bool claim(ticket t, F&& fn) {
        std::lock_guard lock(mutex_);
        auto it = find(t);
        if (it == parked_.end()) return false;
        std::unique_ptr<held> h = std::move(it->second);
        parked_.erase(it);
        std::forward<F>(fn)(std::move(static_cast<held_as<T>&>(*h).value));
        return true;
    }

    // The context's shutdown: nothing parked is reachable afterwards, and it
    // is destroyed here, unrun (after the lock is released).
    void shut_down();

private:
    struct held {
        virtual ~held() = default;
    };
    template <class T>
    struct held_as final : held {
        explicit held_as(T v) : value(std::move(v)) {}
        T value;
    };

    using parked_map = std::map<ticket, std::unique_ptr<held>>;

    // The entry parked as `t` while the context lives, else end() (mutex_ held).
    parked_map::iterator find(ticket t) { return alive_ ? parked_.find(t) : parked_.end(); }

    std::mutex mutex_;
    bool alive_ = true;
    ticket next_ = 1;
    parked_map parked_;
};

// The life of `ctx` (its registry is made on first use).
std::shared_ptr<context_life> life_of(boost::asio::execution_context& ctx);
// Has `ring` shut down (uring::event_ring::shutdown) when `ctx` shuts down.
void shut_down_with(boost::asio::execution_context& ctx, const std::shared_ptr<uring::event_ring>& ring);

}  // namespace ringsafe::asio::detail
