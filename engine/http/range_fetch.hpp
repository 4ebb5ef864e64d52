// Fetching one byte range of a remote object into caller memory, whatever it
// takes: connection reuse, redirects, validators, retries with backoff, and
// resuming after the bytes already received. The object and its hooks:
// http/remote_object.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "http/connection.hpp"
#include "http/header_fields.hpp"
#include "http/remote_object.hpp"
#include "ringsafe/http.hpp"

namespace ringsafe::http {

// Everything a fetch needs besides the range.
struct fetch_context {
    remote_object& object;
    connection_pool& pool;
    const http_options& options;
    std::minstd_rand& random;  // backoff jitter
    // Async runs: abandoning it closes the fetch's connection and cancels its
    // backoff wait at once (the fetch then returns, as when `stop` is true).
    detail::abandon_list* abandon = nullptr;
};

// Fetches [first, first+length) of the object into dst. The first fetch of an
// object (size unknown) may get fewer bytes when the object is shorter; it
// records size and validators and returns the byte count. Throws
// ringsafe::error naming the URL and range: ObjectChanged, RangeNotSupported,
// HttpError (status, too many redirects, attempts exhausted).
net::awaitable<std::uint64_t> fetch_range(fetch_context ctx, std::uint64_t first, std::uint64_t length, std::byte* dst,
                                           std::function<void(std::uint64_t)> on_bytes, std::function<bool()> stop);

}  // namespace ringsafe::http
