// The process-wide thread pool that runs what cannot be asynchronous:
// custom opens, sources without a ring path, and the async writer's
// reservation-overflow relocation and append-mode finish (engine-internal).
#pragma once

#include <functional>

#include <boost/asio/thread_pool.hpp>

namespace ringsafe::asio::detail {

// Two threads, created on first use, joined at exit.
boost::asio::thread_pool& blocking_pool();

// Test hook: a function every offloaded async_writer step runs first, on its
// pool thread (an empty function removes it). Not part of the public API.
void set_offload_hook(std::function<void()> hook);
// Runs the installed offload hook, if any (the offloaded step calls this).
void run_offload_hook();
// Tests: returns once every task posted to the pool before the call has ended
// (a task per pool thread, all of them meeting at once).
void drain_blocking_pool();

}  // namespace ringsafe::asio::detail
