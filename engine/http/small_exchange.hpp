// One small request and its answer, bodies in memory (a token exchange, a
// metadata query): the engine's connections, TLS and retry policy, for what a
// store must ask before its first Range request.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "http/connection.hpp"
#include "ringsafe/http.hpp"

namespace ringsafe::http {

struct small_request {
    std::string method = "GET";                               // "GET" or "POST"
    url target;
    std::vector<std::pair<std::string, std::string>> fields;  // extra header fields
    std::string body;                                         // sent with Content-Length (POST)
};

struct small_response {
    unsigned status = 0;
    std::string content_type;
    std::string body;  // at most max_small_body bytes
};

inline constexpr std::size_t max_small_body = 1u << 20;

// Sends `rq` over a connection of `pool` and reads the whole answer (no
// redirect is followed: the caller sees the 3xx). Connection failures,
// timeouts (first_byte_timeout for the whole answer), 408, 429 and 5xx are
// tried again as `o` says for ranges (max_attempts, backoff); the last answer
// is returned whatever its status. Throws HttpError naming `what` and the URL
// (never the body) when every try failed to get an answer, or one over
// max_small_body; abandoning `abandon` ends it with HttpError too.
net::awaitable<small_response> exchange_small(connection_pool& pool, const small_request& rq, const http_options& o,
                                              detail::abandon_list* abandon, const std::string& what);

}  // namespace ringsafe::http
