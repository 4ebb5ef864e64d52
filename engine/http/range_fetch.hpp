// Fetching one byte range of a remote object into caller memory, whatever it
// takes: connection reuse, redirects, validators, retries with backoff, and
// resuming after the bytes already received.
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
#include "ringsafe/http.hpp"

namespace ringsafe::http {

// Credentials a store fetches over the network and caches (an OAuth access
// token); shared by every copy of a remote_object, so every event loop of a
// read (each on its own thread) may ask at once.
class credential_source {
public:
    virtual ~credential_source() = default;
    // The fields for the next request to the object's origin (e.g.
    // Authorization: Bearer ...), fetched over `pool` when none is cached or
    // the cached one is about to expire. Throws ringsafe::error naming what
    // failed, never the credential.
    virtual net::awaitable<header_fields> fields(connection_pool& pool, const http_options& o,
                                                 detail::abandon_list* abandon) = 0;
};

// What is known about one remote object; shared by all its requests (on one executor).
struct remote_object {
    url requested;                     // the URL as opened (s3: the endpoint URL); credentials belong to its origin
    url location;                      // where requests go: the final URL after redirects
    std::string etag;                  // ETag of the first response ("" when none)
    std::string last_modified;         // Last-Modified of the first response
    std::optional<std::uint64_t> size; // known after the first response
    // Extra fields for a request to `target` (as sent: the pinned version's
    // query included) asking for `range` (the Range
    // value, "bytes=A-B") whose other fields are `fields` (the caller's, the
    // validators If-Match/If-Range, the credentials'): the store's signature
    // (S3 SigV4; Azure Shared Key, which signs Range and If-Match; the Hub's
    // token); called only for requests to the origin of `requested`. Empty: none.
    std::function<header_fields(const url& target, std::string_view range, const header_fields& fields)> sign;
    // Credentials fetched over the network, awaited before each request to
    // the origin of `requested` (their fields precede sign's). Null: none.
    std::shared_ptr<credential_source> credentials;
    // Version pinning (GCS generations): the first response's `pin_field`
    // (e.g. x-goog-generation) is kept in `pinned`; later requests to the
    // origin of `requested` ask for that version with the query parameter
    // `pin_query=<pinned>`, and an answer naming another version or none, or a
    // 404 (the version is gone), is ObjectChanged. Empty pin_field: none.
    std::string pin_field, pin_query, pinned;
    // Called with each response from the origin of `requested` (before a redirect
    // it names is followed): the store reads its own fields there (the Hub's
    // X-Repo-Commit, X-Linked-Size), may update the object (pin `requested`), or
    // throws ringsafe::error to fail the request. Empty: none.
    std::function<void(remote_object& object, const url& target, unsigned status, const header_fields& fields)>
        on_origin_response;
    // `requested` resolves to short-lived locations (the Hub's resolve URL, which
    // redirects to presigned CDN URLs): a 403 or 410 from another origin sends the
    // request back to `requested` to be redirected afresh (up to 3 times in a row
    // without progress), and validators (If-Match, If-Range) go only to the origin
    // whose response gave them.
    bool resolver = false;
    std::string etag_origin;  // the origin of the response that gave etag (resolver objects)
};

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
