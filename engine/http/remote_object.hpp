// What engine/http knows of one remote object, and the hooks a store
// (engine/stores) fills to shape its requests: a signature, credentials
// fetched over the network, version pinning, and a resolver's answers. http/
// names no store: each hook says what it does, the store says what it means.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "http/connection.hpp"
#include "http/header_fields.hpp"
#include "http/url.hpp"
#include "ringsafe/http.hpp"

namespace ringsafe::http {

struct remote_object;

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

// Version pinning (GCS generations): the first response's `field` (e.g.
// x-goog-generation) is kept in remote_object::pinned; later requests to the
// origin of `requested` ask for that version with the query parameter
// `query=<pinned>`, and an answer naming another version or none, or a 404
// (the version is gone), is ObjectChanged.
struct version_pin {
    std::string field;  // the response field that names the version
    std::string query;  // the query parameter that asks for it
};

// A resolver: `requested` resolves to short-lived locations (the Hub's resolve
// URL, which redirects to presigned CDN URLs). A 403 or 410 from another origin
// sends the request back to `requested` to be redirected afresh (up to 3 times
// in a row without progress), and validators (If-Match, If-Range) go only to
// the origin whose response gave them (remote_object::etag_origin).
struct resolve_hook {
    // Called with each response from the origin of `requested` (before a
    // redirect it names is followed): the store reads its own fields there
    // (the Hub's X-Repo-Commit, X-Linked-Size), may update the object (pin
    // `requested`), or throws ringsafe::error to fail the request. Empty: none.
    std::function<void(remote_object& object, const url& target, unsigned status, const header_fields& fields)>
        on_answer;
};

// What is known about one remote object; shared by all its requests (on one executor).
struct remote_object {
    url requested;                     // the URL as opened (s3: the endpoint URL); credentials belong to its origin
    url location;                      // where requests go: the final URL after redirects
    std::string etag;                  // ETag of the first response ("" when none)
    std::string last_modified;         // Last-Modified of the first response
    std::string etag_origin;           // the origin of the first response (which gave etag)
    std::string pinned;                // the version the first response named (pin->field); "" when none
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
    std::optional<version_pin> pin;      // version pinning; none: every request asks for the object as it is
    std::optional<resolve_hook> resolver;  // none: `requested` is the object itself (or a plain redirect)
};

}  // namespace ringsafe::http
