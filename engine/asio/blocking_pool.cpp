// The shared thread pool for blocking work.
#include "asio/blocking_pool.hpp"

namespace ringsafe::asio::detail {

boost::asio::thread_pool& blocking_pool() {
    static boost::asio::thread_pool pool(2);
    return pool;
}

}  // namespace ringsafe::asio::detail
