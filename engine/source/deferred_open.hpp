// Opening a source in two steps (engine-internal): the source without any
// I/O, then its first request as a coroutine on a caller's executor
// (async_open), over the connection pool that async reads on that executor
// use. Remote objects open this way; local files open on the event ring.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "ringsafe/open_source.hpp"
#include "source/abandon_list.hpp"

namespace ringsafe::detail {

// What a source made by prepare_source() is besides a source.
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

// The source open_source() makes for `spec`, before its first request, when
// its kind opens in two steps (its deferred_open side is then non-null);
// null when the kind opens otherwise (local files). Only the checks of the
// spec and options (InvalidArgument) and the TLS setup can fail here. Not
// usable as a source until first_request() has completed.
std::unique_ptr<source> prepare_source(const std::string& spec, const source_options& opts);
// The deferred_open side of a source made by prepare_source().
deferred_open& deferred_side(source& src);

}  // namespace ringsafe::detail
