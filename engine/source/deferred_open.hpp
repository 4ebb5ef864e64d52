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

// What open_source() would open for a spec, before any request: a source
// that opens in two steps (remote objects: `deferred`, not usable as a source
// until its first_request() has completed), or else a local file to open
// (`local_file`, named `name` in messages: the spec itself for a path, the
// cache's file of an hf:// URL named by its pinned URL).
struct prepared_source {
    std::unique_ptr<source> deferred;
    std::string local_file;
    std::string name;
};
// Only the checks of the spec and options (InvalidArgument), a cache lookup
// (an hf:// file missing offline: ENOENT) and the TLS setup can fail here.
prepared_source prepare_source(const std::string& spec, const source_options& opts);
// The deferred_open side of a source made by prepare_source().
deferred_open& deferred_side(source& src);

}  // namespace ringsafe::detail
