// What an answer to a Range GET means (engine/http/response_verdict.hpp):
// every verdict of judge_head, judge_answer and judge_transport, with no
// server: the request, the object and the response are built by hand.
#include <catch2/catch.hpp>

#include <ctime>
#include <string>

#include "http/response_verdict.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"

using namespace ringsafe;
using namespace ringsafe::http;

namespace {

const std::string model = "https://cdn.example/m.safetensors";

// A request for [first, first+length) of `target`, for an object of known `total` (or not yet known).
range_request request(std::uint64_t first, std::uint64_t length, std::optional<std::uint64_t> total = std::nullopt,
                      const std::string& target = model) {
    range_request rq;
    rq.target = parse_url(target);
    rq.first = first;
    rq.length = length;
    rq.total = total;
    return rq;
}

// A 206 for [first, last] of `total`, with the Content-Length of that span.
range_response partial(std::uint64_t first, std::uint64_t last, std::uint64_t total) {
    range_response rs;
    rs.status = 206;
    rs.content_range = "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/" + std::to_string(total);
    rs.total = total;
    rs.content_length = last - first + 1;
    return rs;
}

range_response answer(unsigned status) {
    range_response rs;
    rs.status = status;
    return rs;
}

remote_object object(const std::string& u = model) {
    remote_object o;
    o.requested = parse_url(u);
    o.location = o.requested;
    return o;
}

bool fails_with(const verdict& v, errc e, const std::string& words) {
    INFO(verdict_name(v.kind) << ": " << v.message);
    return v.kind == verdict_kind::fail && v.code == make_error_code(e) &&
           v.message.find(words) != std::string::npos;
}

}  // namespace

TEST_CASE("judge_head: a 206 that matches the request is read; any other status is left to judge_answer") {
    auto rq = request(100, 50, 1000);
    auto v = judge_head(rq, partial(100, 149, 1000));
    CHECK(v.kind == verdict_kind::read_body);
    CHECK(v.bytes == 50);
    for (unsigned s : {200u, 302u, 416u, 503u}) CHECK(judge_head(rq, answer(s)).kind == verdict_kind::skip_body);
    // The first request asks past a short object's end: the answer is clipped to it.
    auto first = judge_head(request(0, 1 << 20), partial(0, 99, 100));
    CHECK(first.kind == verdict_kind::read_body);
    CHECK(first.bytes == 100);
    // A chunked body need not announce its length.
    auto chunked = partial(100, 149, 1000);
    chunked.content_length.reset();
    chunked.chunked = true;
    CHECK(judge_head(rq, chunked).kind == verdict_kind::read_body);
}

TEST_CASE("judge_head: a 206 with a wrong Content-Range is RangeNotSupported, naming it and the range") {
    auto rq = request(100, 50, 1000);
    CHECK(fails_with(judge_head(rq, partial(101, 149, 1000)), errc::RangeNotSupported,
                     "server answered with Content-Range 'bytes 101-149/1000' to bytes 100-149 of " + model));
    CHECK(fails_with(judge_head(rq, partial(100, 150, 1000)), errc::RangeNotSupported, "'bytes 100-150/1000'"));
    CHECK(fails_with(judge_head(rq, partial(100, 148, 1000)), errc::RangeNotSupported, "'bytes 100-148/1000'"));
    // The known size changed under the same validators.
    CHECK(fails_with(judge_head(rq, partial(100, 149, 2000)), errc::RangeNotSupported,
                     "Content-Range total 2000 differs from the object size 1000"));
    auto none = partial(100, 149, 1000);
    for (const char* bad : {"", "bytes */1000", "bytes 100-149", "items 100-149/1000", "bytes 149-100/1000", "bytes 1x-2/3"}) {
        none.content_range = bad;
        CHECK(fails_with(judge_head(rq, none), errc::RangeNotSupported,
                         "206 response without a valid Content-Range ('" + std::string(bad) + "')"));
    }
    // A range that starts at or past the object's end has nothing to land.
    CHECK(fails_with(judge_head(request(100, 50), partial(100, 149, 100)), errc::RangeNotSupported, "'bytes 100-149/100'"));
}

TEST_CASE("judge_head: another ETag or pinned version is ObjectChanged") {
    auto rq = request(0, 10, 1000);
    rq.expect_etag = "\"v1\"";
    auto rs = partial(0, 9, 1000);
    rs.etag = "\"v2\"";
    CHECK(fails_with(judge_head(rq, rs), errc::ObjectChanged, "ETag \"v1\" became \"v2\""));
    rs.etag = "";  // a server that sends no ETag on later answers is not a change
    CHECK(judge_head(rq, rs).kind == verdict_kind::read_body);

    rq.pin_field = "x-goog-generation";
    rq.expect_pin = "7";
    rs.pinned = "8";
    CHECK(fails_with(judge_head(rq, rs), errc::ObjectChanged, "x-goog-generation 7 became 8"));
    rs.pinned = "";
    CHECK(judge_head(rq, rs).kind == verdict_kind::read_body);  // another origin (the CDN) need not name it
    rq.require_pin = true;
    CHECK(fails_with(judge_head(rq, rs), errc::ObjectChanged, "x-goog-generation 7: the answer names none"));
}

TEST_CASE("judge_head: a Content-Encoding or a Content-Length other than the range's is HttpError") {
    auto rq = request(0, 10, 1000);
    auto rs = partial(0, 9, 1000);
    rs.content_encoding = "identity";
    CHECK(judge_head(rq, rs).kind == verdict_kind::read_body);
    rs.content_encoding = "gzip";
    CHECK(fails_with(judge_head(rq, rs), errc::HttpError, "unexpected Content-Encoding 'gzip'"));
    rs.content_encoding = "";
    rs.content_length = 11;
    CHECK(fails_with(judge_head(rq, rs), errc::HttpError, "Content-Length 11 does not match the asked range"));
    rs.content_length.reset();
    CHECK(fails_with(judge_head(rq, rs), errc::HttpError, "Content-Length missing does not match"));
}

TEST_CASE("judge_answer: a 206 is landed; the first one describes the object") {
    auto obj = object();
    auto rq = request(0, 1 << 20);
    auto v = judge_answer(obj, rq, partial(0, 99, 100), {}, {});
    CHECK(v.kind == verdict_kind::landed);
    CHECK(v.bytes == 100);
    CHECK(v.learn);
    CHECK(v.size == 100);
    obj.size = 100;
    auto later = judge_answer(obj, request(10, 20, 100), partial(10, 29, 100), {}, {});
    CHECK(later.kind == verdict_kind::landed);
    CHECK(later.bytes == 20);
    CHECK_FALSE(later.learn);
    // The head's failures stand here too (the exchange has raised them already).
    CHECK(fails_with(judge_answer(obj, request(10, 20, 100), partial(11, 29, 100), {}, {}), errc::RangeNotSupported,
                     "'bytes 11-29/100'"));
}

TEST_CASE("judge_answer: a 200 to a Range request is RangeNotSupported, or ObjectChanged once the object is known") {
    auto obj = object();
    auto rs = answer(200);
    rs.content_length = 100;
    CHECK(fails_with(judge_answer(obj, request(0, 1 << 20), rs, {}, {}), errc::RangeNotSupported,
                     "server ignored the Range request (HTTP 200 instead of 206): bytes 0-1048575 of " + model));
    obj.size = 100;
    CHECK(fails_with(judge_answer(obj, request(0, 10, 100), rs, {}, {}), errc::ObjectChanged,
                     "object changed while being read (HTTP 200 to a conditional request)"));
    CHECK(fails_with(judge_answer(obj, request(0, 10, 100), answer(412), {}, {}), errc::ObjectChanged, "HTTP 412"));
}

TEST_CASE("judge_answer: 416 */0 or an empty 200 to the first request is an empty object; other 416s fail") {
    auto obj = object();
    auto rs = answer(416);
    rs.content_range = "bytes */0";
    auto v = judge_answer(obj, request(0, 1 << 20), rs, {}, {});
    CHECK(v.kind == verdict_kind::empty_object);
    CHECK(v.learn);
    CHECK(v.size == 0);
    auto empty = answer(200);
    empty.content_length = 0;
    empty.total = 55;  // no Content-Range on a 200: an empty body is size 0 whatever else
    auto e = judge_answer(obj, request(0, 1 << 20), empty, {}, {});
    CHECK(e.kind == verdict_kind::empty_object);
    CHECK(e.size == 0);
    // A 416 naming a size: recorded, then HttpError as any 416.
    rs.content_range = "bytes */100";
    rs.total = 100;
    auto sized = judge_answer(obj, request(0, 1 << 20), rs, {}, {});
    CHECK(fails_with(sized, errc::HttpError, "HTTP 416 for bytes 0-1048575"));
    CHECK(sized.learn);
    CHECK(sized.size == 100);
    // Not the first request: a plain failure, nothing learned.
    auto later = judge_answer(obj, request(5, 10), rs, {}, {});
    CHECK(fails_with(later, errc::HttpError, "HTTP 416"));
    CHECK_FALSE(later.learn);
    obj.size = 100;
    CHECK_FALSE(judge_answer(obj, request(0, 10, 100), rs, {}, {}).learn);
}

TEST_CASE("judge_answer: redirects resolve against the target and are counted") {
    auto obj = object("https://hub.example/r/model.safetensors");
    auto rq = request(0, 10, std::nullopt, "https://hub.example/r/model.safetensors");
    auto rs = answer(302);
    rs.location = "/cdn/abc?sig=1";
    http_options o;
    o.max_redirects = 3;
    auto v = judge_answer(obj, rq, rs, fetch_tally{2, 0}, o);
    REQUIRE(v.kind == verdict_kind::redirect);
    CHECK(v.next.shown() == "https://hub.example/cdn/abc?sig=...");
    CHECK(v.next.target == "/cdn/abc?sig=1");
    CHECK(fails_with(judge_answer(obj, rq, rs, fetch_tally{3, 0}, o), errc::HttpError,
                     "more than 3 redirects for bytes 0-9 of https://hub.example/r/model.safetensors"));
    for (unsigned s : {301u, 303u, 307u, 308u}) {
        auto other = rs;
        other.status = s;
        CHECK(judge_answer(obj, rq, other, {}, o).kind == verdict_kind::redirect);
    }
    rs.location = "";
    CHECK(fails_with(judge_answer(obj, rq, rs, {}, o), errc::HttpError, "HTTP 302 without Location"));
    rs.location = "ftp://elsewhere/x";
    CHECK(fails_with(judge_answer(obj, rq, rs, {}, o), errc::HttpError, "refused a redirect"));
}

TEST_CASE("judge_answer: a redirect from https to anything else is refused; http only with allow_https_downgrade") {
    auto obj = object();
    auto rq = request(0, 10);
    auto rs = answer(307);
    rs.location = "http://plain.example/m";
    http_options o;
    CHECK(fails_with(judge_answer(obj, rq, rs, {}, o), errc::HttpError,
                     "refused a redirect from " + model + " to http://plain.example/m: https to http "
                     "(allow_https_downgrade permits http)"));
    o.allow_https_downgrade = true;
    auto v = judge_answer(obj, rq, rs, {}, o);
    CHECK(v.kind == verdict_kind::redirect);
    CHECK(v.next.scheme == "http");
    // From http, anywhere http(s) is fine.
    auto plain = request(0, 10, std::nullopt, "http://plain.example/m");
    rs.location = "https://cdn.example/m";
    CHECK(judge_answer(object("http://plain.example/m"), plain, rs, {}, {}).kind == verdict_kind::redirect);
}

TEST_CASE("judge_answer: 408, 429 and 5xx are retried, with the server's Retry-After") {
    auto obj = object();
    auto rq = request(0, 10);
    for (unsigned s : {408u, 429u, 500u, 502u, 503u, 504u}) {
        auto v = judge_answer(obj, rq, answer(s), {}, {});
        CHECK(v.kind == verdict_kind::retry);
        CHECK(v.message == "HTTP " + std::to_string(s) + " for bytes 0-9 of " + model);
        CHECK_FALSE(v.retry_after);
    }
    auto rs = answer(429);
    rs.retry_after = std::chrono::milliseconds(7000);
    auto v = judge_answer(obj, rq, rs, {}, {});
    CHECK(v.kind == verdict_kind::retry);
    CHECK(v.message == "HTTP 429 with Retry-After for bytes 0-9 of " + model);
    CHECK(v.retry_after == std::chrono::milliseconds(7000));
    for (unsigned s : {400u, 401u, 403u, 404u, 410u, 451u})
        CHECK(fails_with(judge_answer(obj, rq, answer(s), {}, {}), errc::HttpError, "HTTP " + std::to_string(s) + " for"));
}

TEST_CASE("judge_answer: a pinned version gone (404 at the pinning origin) is ObjectChanged") {
    auto obj = object("https://storage.example/b/o");
    obj.size = 100;
    obj.pin = version_pin{"x-goog-generation", "generation"};
    obj.pinned = "42";
    auto rq = request(0, 10, 100, "https://storage.example/b/o?generation=42");
    CHECK(fails_with(judge_answer(obj, rq, answer(404), {}, {}), errc::ObjectChanged,
                     "(generation 42 is gone: HTTP 404)"));
    // From another origin a 404 is a 404.
    CHECK(fails_with(judge_answer(obj, request(0, 10, 100), answer(404), {}, {}), errc::HttpError, "HTTP 404 for"));
}

TEST_CASE("judge_answer: a 403 or 410 from a resolver's CDN re-resolves, three times in a row at most") {
    auto obj = object("https://hub.example/r/m");
    obj.resolver.emplace();
    auto cdn = request(0, 10);
    for (unsigned s : {403u, 410u}) {
        CHECK(judge_answer(obj, cdn, answer(s), fetch_tally{0, 2}, {}).kind == verdict_kind::re_resolve);
        CHECK(fails_with(judge_answer(obj, cdn, answer(s), fetch_tally{0, 3}, {}), errc::HttpError,
                         "HTTP " + std::to_string(s) + " for"));
    }
    // At the resolver itself, or for an object that is not a resolver's: a failure.
    CHECK(judge_answer(obj, request(0, 10, std::nullopt, "https://hub.example/r/m"), answer(403), {}, {}).kind ==
          verdict_kind::fail);
    obj.resolver.reset();
    CHECK(judge_answer(obj, cdn, answer(403), {}, {}).kind == verdict_kind::fail);
}

TEST_CASE("judge_transport: one at-once retry for a reused connection that had closed; else back off") {
    range_response none;
    CHECK(judge_transport(true, none, false, "reset").kind == verdict_kind::stale_retry);
    auto used = judge_transport(true, none, true, "reset");
    CHECK(used.kind == verdict_kind::retry);
    CHECK(used.message == "reset");
    CHECK(judge_transport(false, none, false, "refused").kind == verdict_kind::retry);
    // A header came back, then the body was lost: not a stale connection.
    auto body = partial(0, 9, 100);
    body.retry_after = std::chrono::milliseconds(1000);
    auto lost = judge_transport(true, body, false, "connection lost after 3 body bytes");
    CHECK(lost.kind == verdict_kind::retry);
    CHECK(lost.retry_after == std::chrono::milliseconds(1000));
}

TEST_CASE("parse_content_range and parse_retry_after") {
    auto cr = parse_content_range("bytes 5-9/10");
    REQUIRE(cr);
    CHECK((cr->first == 5 && cr->last == 9 && cr->total == 10 && !cr->unsatisfied));
    auto star = parse_content_range("bytes */10");
    REQUIRE(star);
    CHECK((star->unsatisfied && star->total == 10));
    for (const char* bad : {"", "bytes", "bytes 5-9", "bytes 9-5/10", "bytes -9/10", "bytes 5-9/", "bytes 5-9/x", "bytes 5-9/10 "})
        CHECK_FALSE(parse_content_range(bad));
    const std::time_t now = 1'700'000'000;  // 2023-11-14 22:13:20 GMT
    CHECK(parse_retry_after("120", now) == std::chrono::milliseconds(120'000));
    CHECK(parse_retry_after("99999999", now) == std::chrono::milliseconds(86'400'000));
    CHECK(parse_retry_after("Tue, 14 Nov 2023 22:13:50 GMT", now) == std::chrono::milliseconds(30'000));
    CHECK(parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now) == std::chrono::milliseconds(0));
    CHECK_FALSE(parse_retry_after("soon", now));
}

TEST_CASE("verdict_name names every kind") {
    for (auto k : {verdict_kind::skip_body, verdict_kind::read_body, verdict_kind::landed, verdict_kind::empty_object,
                   verdict_kind::redirect, verdict_kind::re_resolve, verdict_kind::stale_retry, verdict_kind::retry,
                   verdict_kind::fail})
        CHECK(std::string(verdict_name(k)) != "unknown");
}
