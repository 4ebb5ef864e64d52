// http(s) URLs: parsing (IPv4, [IPv6], ports), percent-encoding of request
// targets, and resolution of redirect Locations. A store's own URLs (s3://,
// gs://, az://, hf://) have their grammars in engine/stores.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringsafe::http {

// A parsed absolute http(s) URL.
struct url {
    std::string scheme;       // "http" or "https" (lower case)
    std::string host;         // IPv6 literals without brackets; lower case
    std::uint16_t port = 0;   // explicit or the scheme's default
    std::string target;       // origin-form request target: "/path?query", percent-encoded
    bool ipv6 = false;        // host is an IPv6 literal

    // host[:port] as sent in the Host header (brackets for IPv6, default port omitted).
    std::string authority() const;
    // scheme://authority: two URLs with equal origins share a connection pool.
    std::string origin() const;
    // The whole URL.
    std::string str() const { return origin() + target; }
    // The URL for messages: str() with the values of the query parameters that
    // sign it shown as "..." (ringsafe::without_url_secrets, which every error
    // message passes through too): a presigned URL a redirect led to is a credential.
    std::string shown() const;
};

// An absolute URL's parts as written: SCHEME "://" AUTHORITY TARGET, the
// fragment dropped; the target from the first '/' or '?' after "://" ("" when
// none). Views into `text`. Throws InvalidArgument naming `text` when it has no "://".
struct url_parts {
    std::string_view scheme;
    std::string_view authority;
    std::string_view target;
};
url_parts split_url(std::string_view text);

// The host and port of a URL's authority (host[:port], [IPv6][:port]): host
// lower case, IPv6 without brackets; port 0 when none is written. Throws
// InvalidArgument naming `text` (the URL) for credentials ('@'), a bad host or port.
struct url_host {
    std::string host;
    std::uint16_t port = 0;
    bool ipv6 = false;
};
url_host parse_authority(std::string_view authority, std::string_view text);

// Parses `text`; throws ringsafe::error(InvalidArgument) naming the URL when it
// is not an absolute http/https URL with a valid host and port. Characters
// that may not appear in a request target (space, non-ASCII, ...) are
// percent-encoded; existing %XX escapes are kept. The fragment is dropped.
url parse_url(std::string_view text);

// Resolves a redirect's Location (absolute, scheme-relative "//host/..",
// absolute-path "/..", or relative "a/b") against `base` (RFC 3986 section 5).
// Throws HttpError naming both when the Location has a scheme other than http
// or https (s3://, ftp://, file:, ...); InvalidArgument for a malformed one.
url resolve_location(const url& base, std::string_view location);

// The scheme a redirect's Location starts with (RFC 3986: "name:" before any
// '/', '?' or '#'), as written; "" for a relative reference.
std::string_view location_scheme(std::string_view location);

// A request target split at its first '?': the path, and the query after the
// '?' ("" when there is none). Views into `target`.
struct target_parts {
    std::string_view path;
    std::string_view query;
};
target_parts split_target(std::string_view target);

// One parameter of a query, as written (not decoded): "NAME=VALUE" split at
// its first '=', or "NAME" (has_value false, value "").
struct query_parameter {
    std::string_view name;
    std::string_view value;
    bool has_value = false;
};

// The parameters of `query` (without the '?'), in order, split at each '&';
// empty ones ("a&&b", a trailing '&') are left out. Views into `query`.
std::vector<query_parameter> query_parameters(std::string_view query);

// Appends `parameter` ("NAME=VALUE" or several joined by '&', already
// percent-encoded) to u's query: after a '?' when the target has none yet,
// else after a '&'.
void append_query(url& u, std::string_view parameter);

// Percent-encodes every byte except RFC 3986 unreserved characters, and '/'
// when keep_slash (the AWS SigV4 "UriEncode").
std::string uri_encode(std::string_view raw, bool keep_slash);

// Decodes each %XX escape (urllib.parse.unquote); anything else, a malformed
// escape included, is kept as it is.
std::string percent_decode(std::string_view text);

// `endpoint` (scheme, host, port and an optional path prefix, with or without
// a trailing '/') with `path` (percent-encoded, no leading '/') below its path:
// where a store's object lies on its endpoint.
url below(url endpoint, std::string_view path);

// Throws InvalidArgument "invalid URL 'TEXT': WHY" (the one phrasing of a URL refused).
[[noreturn]] void invalid_url(std::string_view text, const std::string& why);

// Default port of a scheme: 80 for http, 443 for https.
std::uint16_t default_port(std::string_view scheme);

}  // namespace ringsafe::http
