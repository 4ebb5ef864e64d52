// The process-wide thread pool that runs what cannot be asynchronous:
// custom opens, sources without a ring path, and the async writer's
// reservation-overflow relocation and append-mode finish (engine-internal).
#pragma once

#include <boost/asio/thread_pool.hpp>

namespace ringsafe::asio::detail {

// Two threads, created on first use, joined at exit.
boost::asio::thread_pool& blocking_pool();

}  // namespace ringsafe::asio::detail
