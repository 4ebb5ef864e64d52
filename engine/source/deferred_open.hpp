// Opening a source in two steps (engine-internal): the source without any
// I/O, then its first request as a coroutine on a caller's executor
// (async_open), over the connection pool that async reads on that executor
// use. Remote objects open this way; local files open on the event ring.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "ringsafe/source.hpp"
#include "source/abandon_list.hpp"

namespace ringsafe::detail {

// What a source made by dispatch::prepare_source() is besides a source.
class deferred_open {
public:
    virtual ~deferred_open() = default;
    // The blocking open's first request (size, validators, prefix(); for
    // URLs: redirects, auth, S3 signing, retries) on `ex`, which must run its
    // handlers one at a time (a strand). Throws as the blocking open. When
    // `abandon` is abandoned, the request is dropped at once and this returns
    // early: the caller must check.
    virtual boost::asio::awaitable<void> first_request(boost::asio::any_io_executor ex, abandon_list* abandon) = 0;
};

// The deferred_open side of a source made by prepare_source().
inline deferred_open& deferred_side(source& src) { return dynamic_cast<deferred_open&>(src); }

}  // namespace ringsafe::detail
