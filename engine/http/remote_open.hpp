// Opening a remote object in two steps (engine-internal): the source without
// any request, then its first request as a coroutine on a caller's executor
// (async_open), over the connection pool that async reads on that executor use.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include "http/abandon_list.hpp"
#include "ringsafe/http.hpp"

namespace ringsafe::http_engine {

// What a source made by prepare_url() is besides a source.
class deferred_open {
public:
    virtual ~deferred_open() = default;
    // open_url's first request (size, validators, prefix(); redirects, auth,
    // S3 signing, retries) on `ex`, which must run its handlers one at a time
    // (a strand). Throws as open_url. When `abandon` is abandoned, the request
    // is dropped at once and this returns early: the caller must check.
    virtual boost::asio::awaitable<void> first_request(boost::asio::any_io_executor ex, abandon_list* abandon) = 0;
};

// The source open_url() makes, before its first request: only the checks of
// the URL and options (InvalidArgument) and the TLS setup can fail here.
// Not usable as a source until first_request() has completed.
std::unique_ptr<source> prepare_url(const std::string& url, const http_options& opts);

}  // namespace ringsafe::http_engine
