// One Range GET on one connection: send the request, read the response
// header, validate it against the asked range, and read the body straight
// into the caller's destination (never a byte outside it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "http/connection.hpp"

namespace ringsafe::http {

// What to ask for.
struct range_request {
    url target;                                               // where to send it
    std::vector<std::pair<std::string, std::string>> fields;  // extra header fields (auth, validators, ...)
    std::uint64_t first = 0;                                  // first byte asked
    std::uint64_t length = 0;                                 // bytes asked (> 0)
    std::optional<std::uint64_t> total;                       // the object's known size (nullopt on the first request)
    std::string expect_etag;                                  // the first response's ETag: another one is ObjectChanged
    std::string pin_field;                                    // a response field to report in range_response::pinned
    std::string expect_pin;                                   // its first value: another one is ObjectChanged
    bool require_pin = false;                                 // and an answer naming none (the pinning origin's)
    std::byte* dst = nullptr;                                 // `length` bytes of caller memory
    std::chrono::milliseconds first_byte_timeout{30'000};
    std::chrono::milliseconds stall_timeout{30'000};
    std::uint64_t low_speed_limit = 0;                        // bytes/s a body must average over low_speed_time (0: off)
    std::chrono::milliseconds low_speed_time{30'000};
    std::function<void(std::uint64_t)> on_bytes;              // bytes landed in dst (may be empty)
    std::function<bool()> stop;                               // true: abandon the body (cancel / another failure)
    bool keep_fields = false;                                 // copy the response's header fields into range_response::fields
};

// What came back. `received` counts the body bytes written to dst, also when
// the exchange ends in an exception, so the caller can resume after them.
struct range_response {
    unsigned status = 0;
    std::string location;                                    // for 3xx
    std::optional<std::chrono::milliseconds> retry_after;    // for 429 / 5xx
    std::string etag, last_modified;
    std::string pinned;                                      // the value of range_request::pin_field
    std::string content_range;                               // as sent
    std::uint64_t total = 0;                                 // from Content-Range (206, 416)
    std::optional<std::uint64_t> content_length;             // as announced
    std::string content_encoding;                            // as sent ("" when none)
    bool chunked = false;                                    // Transfer-Encoding: chunked
    std::uint64_t expected = 0;                              // body bytes the 206 announced (<= length)
    std::uint64_t received = 0;
    bool stopped = false;                                    // request.stop() ended it early
    std::vector<std::pair<std::string, std::string>> fields;  // every header field, when keep_fields
};

// Exchanges one request on `c`. Returns with the status for non-206
// responses (the body is not read; the connection is marked not reusable).
// For a 206 it reads the body when judge_head (response_verdict.hpp) says so
// (Content-Range exactly [first, first+length) clipped to the total, the known
// total, validators, Content-Length) and raises its failure otherwise.
// Throws ringsafe::error (RangeNotSupported / HttpError naming URL and range)
// for an invalid 206, transport_failure for resets, early closes and timeouts.
net::awaitable<void> exchange_range(connection& c, const range_request& rq, range_response& rs);

// The Range field's value for [first, first+length): "bytes=A-B".
std::string range_value(std::uint64_t first, std::uint64_t length);

// "bytes=A-B of URL" for messages.
std::string describe_range(const url& u, std::uint64_t first, std::uint64_t length);

}  // namespace ringsafe::http
