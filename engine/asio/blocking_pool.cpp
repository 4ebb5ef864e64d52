// The shared thread pool for blocking work, and its test hook.
#include "asio/blocking_pool.hpp"

#include <latch>
#include <memory>
#include <mutex>

#include <boost/asio/post.hpp>

namespace ringsafe::asio::detail {

namespace {
constexpr int pool_threads = 2;
}  // namespace

boost::asio::thread_pool& blocking_pool() {
    static boost::asio::thread_pool pool(pool_threads);
    return pool;
}

void drain_blocking_pool() {
    // Each thread takes one of these tasks only after what it ran before,
    // and none returns before all are taken.
    auto met = std::make_shared<std::latch>(pool_threads + 1);
    for (int i = 0; i < pool_threads; ++i) boost::asio::post(blocking_pool(), [met] { met->arrive_and_wait(); });
    met->arrive_and_wait();
}

namespace {
std::mutex hook_mutex;
std::function<void()> offload_hook;
}  // namespace

void set_offload_hook(std::function<void()> hook) {
    std::lock_guard lock(hook_mutex);
    offload_hook = std::move(hook);
}

void run_offload_hook() {
    std::function<void()> hook;
    {
        std::lock_guard lock(hook_mutex);
        hook = offload_hook;
    }
    if (hook) hook();
}

}  // namespace ringsafe::asio::detail
