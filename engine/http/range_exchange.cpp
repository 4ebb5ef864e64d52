#include "http/range_exchange.hpp"

#include <algorithm>
#include <cstring>
#include <ctime>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include "http/body_watchdog.hpp"
#include "http/response_verdict.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::http {
namespace bhttp = beast::http;  // Beast's HTTP, not this namespace
namespace {

// A response header the parser refused for what it says (a bad status line,
// field or version, one over the size limit), as opposed to a connection
// that ended before the header did (end_of_stream, partial_message).
bool malformed_header(const boost::system::error_code& ec) {
    static const auto& parse_errors = make_error_code(bhttp::error::bad_field).category();
    return ec.category() == parse_errors && ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message &&
           ec != bhttp::error::need_more && ec != bhttp::error::need_buffer;
}

[[noreturn]] void fail_transport(const range_request& rq, const std::string& what, const boost::system::error_code& ec) {
    throw transport_failure(what + " (" + ec.message() + ") for " + describe_range(rq.target, rq.first, rq.length));
}

template <class Stream>
net::awaitable<void> run_exchange(connection& c, Stream& stream, const range_request& rq, range_response& rs) {
    using net::redirect_error, net::use_awaitable;
    boost::system::error_code ec;
    c.reusable = false;
    bhttp::request<bhttp::empty_body> req{bhttp::verb::get, rq.target.target, 11};
    req.set(bhttp::field::host, rq.target.authority());
    req.set(bhttp::field::user_agent, "ringsafe/0.1");
    req.set(bhttp::field::range, range_value(rq.first, rq.length));
    for (auto& [k, v] : rq.fields) req.set(k, v);
    req.keep_alive(true);
    ++c.requests;

    c.lowest().expires_after(rq.first_byte_timeout);
    co_await bhttp::async_write(stream, req, redirect_error(use_awaitable, ec));
    if (ec) fail_transport(rq, "sending the request failed", ec);
    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.body_limit(boost::none);
    co_await bhttp::async_read_header(stream, c.header_buffer, parser, redirect_error(use_awaitable, ec));
    if (ec == beast::error::timeout) fail_transport(rq, "no response header within the first-byte timeout", ec);
    if (malformed_header(ec))  // the server's answer, not a transient fault: asking again gets the same
        raise(errc::HttpError, "malformed response header (" + ec.message() + ") for " +
                                   describe_range(rq.target, rq.first, rq.length));
    if (ec) fail_transport(rq, "reading the response header failed", ec);

    auto& res = parser.get();
    rs.status = res.result_int();
    rs.location = std::string(res[bhttp::field::location]);
    rs.etag = std::string(res[bhttp::field::etag]);
    rs.last_modified = std::string(res[bhttp::field::last_modified]);
    if (auto ra = res[bhttp::field::retry_after]; !ra.empty()) rs.retry_after = parse_retry_after(ra, std::time(nullptr));
    rs.content_range = std::string(res[bhttp::field::content_range]);
    if (auto cr = parse_content_range(rs.content_range)) rs.total = cr->total;
    if (parser.content_length()) rs.content_length = *parser.content_length();
    rs.content_encoding = std::string(res[bhttp::field::content_encoding]);
    rs.chunked = parser.chunked();
    if (!rq.pin_field.empty()) rs.pinned = std::string(res[rq.pin_field]);
    if (rq.keep_fields)
        for (const auto& f : res) rs.fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
    const verdict head = judge_head(rq, rs);
    if (head.kind == verdict_kind::skip_body) co_return;  // the caller decides; the body is never read
    if (head.kind != verdict_kind::read_body) throw error(head.code, head.message);
    rs.expected = head.bytes;

    const std::string what = describe_range(rq.target, rq.first, rq.length);
    // The body: no expiry on the stream (it would arm a timer per read); the
    // watchdog enforces stall_timeout between bytes instead.
    c.lowest().expires_never();
    body_watchdog watchdog(c, rq.stall_timeout, rq.low_speed_limit, rq.low_speed_time);
    auto body_failed = [&](const char* lost, const char* unit) {
        if (watchdog.stalled())
            fail_transport(rq, "body stalled after " + std::to_string(rs.received) + " bytes",
                           make_error_code(beast::error::timeout));
        if (watchdog.too_slow())
            fail_transport(rq, "body slower than " + std::to_string(rq.low_speed_limit) + " bytes/s over " +
                                   std::to_string(rq.low_speed_time.count()) + " ms, after " +
                                   std::to_string(rs.received) + " bytes",
                           make_error_code(beast::error::timeout));
        fail_transport(rq, lost + std::to_string(rs.received) + unit, ec);
    };
    if (parser.chunked()) {
        // Rare for a 206: let the parser decode chunks, still into dst only.
        while (!parser.is_done()) {
            if (rq.stop && rq.stop()) {
                rs.stopped = true;
                co_return;
            }
            if (rs.received == rs.expected)
                raise(errc::HttpError, "response body longer than the asked range: " + what);
            res.body().data = rq.dst + rs.received;
            res.body().size = rs.expected - rs.received;
            res.body().more = true;
            co_await bhttp::async_read_some(stream, c.header_buffer, parser, redirect_error(use_awaitable, ec));
            std::uint64_t n = (rs.expected - rs.received) - res.body().size;
            rs.received += n;
            if (n) watchdog.progress(n);
            if (n && rq.on_bytes) rq.on_bytes(n);
            if (ec == bhttp::error::need_buffer) ec = {};
            if (ec) body_failed("reading the body failed after ", " bytes");
        }
        if (rs.received != rs.expected)
            raise(errc::HttpError, "response body shorter than its Content-Range: " + what);
        c.reusable = parser.keep_alive();
        co_return;
    }

    // Body bytes that arrived with the header (at most the header buffer's size).
    auto early = c.header_buffer.data();
    std::uint64_t n = std::min<std::uint64_t>(early.size(), rs.expected);
    std::memcpy(rq.dst, early.data(), n);
    c.header_buffer.consume(c.header_buffer.size());
    bool extra = early.size() > n;
    rs.received = n;
    if (n && rq.on_bytes) rq.on_bytes(n);
    // The rest straight from the socket into the caller's memory.
    while (rs.received < rs.expected) {
        if (rq.stop && rq.stop()) {
            rs.stopped = true;
            co_return;
        }
        const std::uint64_t want = std::min<std::uint64_t>(rs.expected - rs.received, 16u << 20);
        std::size_t got = co_await stream.async_read_some(net::buffer(rq.dst + rs.received, want),
                                                          redirect_error(use_awaitable, ec));
        rs.received += got;
        if (got) watchdog.progress(got);
        if (got && rq.on_bytes) rq.on_bytes(got);
        if (ec) body_failed("connection lost after ", " body bytes");
    }
    c.reusable = !extra && parser.keep_alive();
}

}  // namespace

std::string range_value(std::uint64_t first, std::uint64_t length) {
    return "bytes=" + std::to_string(first) + "-" + std::to_string(first + length - 1);
}

std::string describe_range(const url& u, std::uint64_t first, std::uint64_t length) {
    return "bytes " + std::to_string(first) + "-" + std::to_string(first + length - 1) + " of " + u.shown();
}

net::awaitable<void> exchange_range(connection& c, const range_request& rq, range_response& rs) {
    check_request_target(rq.target);
    if (c.tls)
        co_await run_exchange(c, *c.tls, rq, rs);
    else
        co_await run_exchange(c, *c.tcp, rq, rs);
}

}  // namespace ringsafe::http
