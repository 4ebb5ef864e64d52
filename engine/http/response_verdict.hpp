// What an answer to a Range GET means, decided with no I/O: from the object
// (what the first answer said of it), the request, the response's header and
// the fetch's counters. The exchange (range_exchange) and the fetch loop
// (range_fetch) carry bytes to these functions and act on their verdict, as
// writer::finish's publish steps are sans-I/O records that a blocking and an
// event-driven driver both act on.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "http/range_exchange.hpp"
#include "http/range_fetch.hpp"

namespace ringsafe::http {

enum class verdict_kind {
    skip_body,     // judge_head: not a 206; the body is not read and judge_answer decides
    read_body,     // judge_head: a 206 that matches the request: read `bytes` into the destination
    landed,        // judge_answer: a 206's `bytes` (all asked, or up to the object's end) are in
    empty_object,  // judge_answer: the object is empty (416 "*/0" or an empty 200 to the first request)
    redirect,      // judge_answer: ask again at `next` (count it)
    re_resolve,    // judge_answer: an expired presigned location: ask the resolver again (count it)
    stale_retry,   // judge_transport: an idle connection the server had closed: ask again at once
    retry,         // judge_answer / judge_transport: a transient failure (`message`): back off, ask again
    fail,          // give up: raise `code` with `message`
};

// A Content-Range value: "bytes A-B/T", or "bytes */T" (unsatisfied).
struct content_range {
    bool unsatisfied = false;
    std::uint64_t first = 0, last = 0, total = 0;
};
// nullopt when `v` is not one of those forms (or B < A).
std::optional<content_range> parse_content_range(std::string_view v);

// A Retry-After value (delta-seconds, at most a day, or an HTTP-date after
// `now`, 0 when past) as a wait; nullopt when it is neither.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view v, std::time_t now);

// The verdict kind's name, for tests and messages ("landed", "redirect", ...).
const char* verdict_name(verdict_kind k) noexcept;

// One verdict. `learn`: the answer describes the object (`size`, and the
// response's validators and pinned version), to be recorded before acting
// (with any kind).
struct verdict {
    verdict_kind kind = verdict_kind::fail;
    std::uint64_t bytes = 0;                               // read_body, landed: body bytes (<= the request's length)
    url next;                                              // redirect: where to ask
    std::error_code code;                                  // fail: the error to raise
    std::string message;                                   // fail: its message; retry: what failed
    std::optional<std::chrono::milliseconds> retry_after;  // retry: the server's Retry-After
    bool learn = false;
    std::uint64_t size = 0;                                // with learn: the object's size to record
};

// The fetch loop's counts that a verdict depends on.
struct fetch_tally {
    unsigned redirects = 0;  // redirects followed for this range
    unsigned refreshes = 0;  // re-resolves in a row without a byte received
};

// The verdict on a response header for request `rq`: skip_body for any status
// but 206; for a 206, read_body with the byte count it announces, or fail
// (ObjectChanged: another ETag or pinned version; RangeNotSupported: a
// Content-Range that is missing or is not the asked range clipped to the known
// total; HttpError: a Content-Encoding, a Content-Length that is not the range's).
verdict judge_head(const range_request& rq, const range_response& rs);

// The verdict on a complete answer `rs` (the exchange ended without a
// transport failure and was not stopped) to `rq`, sent for `obj` as it stood;
// `t` counts what came before. landed, empty_object, redirect, re_resolve,
// retry or fail, with the messages fetch_range raises.
verdict judge_answer(const remote_object& obj, const range_request& rq, const range_response& rs, const fetch_tally& t,
                     const http_options& o);

// The verdict on a transport failure (`failure`, its message): stale_retry
// when the connection was reused, no status came back and the one stale retry
// is unused; retry otherwise.
verdict judge_transport(bool reused, const range_response& rs, bool stale_retry_used, std::string failure);

}  // namespace ringsafe::http
