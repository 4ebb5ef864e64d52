#include "http/range_exchange.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <ctime>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include "http/body_watchdog.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::http {
namespace bhttp = beast::http;  // Beast's HTTP, not this namespace
namespace {

struct content_range {
    bool unsatisfied = false;  // "bytes */T"
    std::uint64_t first = 0, last = 0, total = 0;
};

bool parse_u64(std::string_view s, std::uint64_t& v) {
    if (s.empty()) return false;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc{} && r.ptr == s.data() + s.size();
}

std::optional<content_range> parse_content_range(std::string_view v) {
    if (!v.starts_with("bytes ")) return std::nullopt;
    v.remove_prefix(6);
    auto slash = v.find('/');
    if (slash == std::string_view::npos) return std::nullopt;
    content_range cr;
    if (!parse_u64(v.substr(slash + 1), cr.total)) return std::nullopt;
    auto span = v.substr(0, slash);
    if (span == "*") {
        cr.unsatisfied = true;
        return cr;
    }
    auto dash = span.find('-');
    if (dash == std::string_view::npos || !parse_u64(span.substr(0, dash), cr.first) ||
        !parse_u64(span.substr(dash + 1), cr.last) || cr.last < cr.first)
        return std::nullopt;
    return cr;
}

// Retry-After: delta-seconds or an HTTP-date.
std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view v) {
    std::uint64_t secs = 0;
    if (parse_u64(v, secs)) return std::chrono::milliseconds(std::min<std::uint64_t>(secs, 86400) * 1000);
    std::tm tm{};
    std::string s(v);
    if (!strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm)) return std::nullopt;
    auto when = timegm(&tm), now = std::time(nullptr);
    return std::chrono::milliseconds(when > now ? (when - now) * 1000 : 0);
}

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
    if (auto ra = res[bhttp::field::retry_after]; !ra.empty()) rs.retry_after = parse_retry_after(ra);
    auto cr = parse_content_range(res[bhttp::field::content_range]);
    if (cr) rs.total = cr->total;
    if (parser.content_length()) rs.content_length = *parser.content_length();
    if (!rq.pin_field.empty()) rs.pinned = std::string(res[rq.pin_field]);
    if (rq.keep_fields)
        for (const auto& f : res) rs.fields.emplace_back(std::string(f.name_string()), std::string(f.value()));
    if (rs.status != 206) co_return;  // the caller decides; the body is never read

    const std::string what = describe_range(rq.target, rq.first, rq.length);
    if (!rq.expect_etag.empty() && !rs.etag.empty() && rs.etag != rq.expect_etag)
        raise(errc::ObjectChanged, "object changed while being read (ETag " + rq.expect_etag + " became " + rs.etag + "): " + what);
    if (!rq.expect_pin.empty() && (rq.require_pin || !rs.pinned.empty()) && rs.pinned != rq.expect_pin)
        raise(errc::ObjectChanged, "object changed while being read (" + rq.pin_field + " " + rq.expect_pin +
                                       (rs.pinned.empty() ? ": the answer names none" : " became " + rs.pinned) +
                                       "): " + what);
    if (!cr || cr->unsatisfied)
        raise(errc::RangeNotSupported, "206 response without a valid Content-Range ('" +
                                           std::string(res[bhttp::field::content_range]) + "') for " + what);
    if (rq.total && cr->total != *rq.total)
        raise(errc::RangeNotSupported, "Content-Range total " + std::to_string(cr->total) + " differs from the object size " +
                                           std::to_string(*rq.total) + ": " + what);
    const std::uint64_t end = std::min(rq.first + rq.length, cr->total);
    if (cr->first != rq.first || end <= rq.first || cr->last != end - 1)
        raise(errc::RangeNotSupported, "server answered with Content-Range 'bytes " + std::to_string(cr->first) + "-" +
                                           std::to_string(cr->last) + "/" + std::to_string(cr->total) + "' to " + what);
    rs.expected = end - rq.first;
    if (auto enc = res[bhttp::field::content_encoding]; !enc.empty() && enc != "identity")
        raise(errc::HttpError, "unexpected Content-Encoding '" + std::string(enc) + "' for " + what);

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

    if (!parser.content_length() || *parser.content_length() != rs.expected)
        raise(errc::HttpError, "Content-Length " +
                                   (parser.content_length() ? std::to_string(*parser.content_length()) : std::string("missing")) +
                                   " does not match the asked range: " + what);
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
