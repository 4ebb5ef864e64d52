#include "http/response_verdict.hpp"

#include <algorithm>
#include <charconv>
#include <ctime>

#include "ringsafe/error.hpp"

namespace ringsafe::http {
namespace {

bool is_redirect(unsigned s) { return s == 301 || s == 302 || s == 303 || s == 307 || s == 308; }
bool is_retryable(unsigned s) { return s == 408 || s == 429 || s >= 500; }

bool parse_u64(std::string_view s, std::uint64_t& v) {
    if (s.empty()) return false;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc{} && r.ptr == s.data() + s.size();
}

verdict of_kind(verdict_kind k) {
    verdict v;
    v.kind = k;
    return v;
}

verdict failed(errc e, std::string message) {
    verdict v;
    v.code = make_error_code(e);
    v.message = std::move(message);
    return v;
}

}  // namespace

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

std::optional<std::chrono::milliseconds> parse_retry_after(std::string_view v, std::time_t now) {
    std::uint64_t secs = 0;
    if (parse_u64(v, secs)) return std::chrono::milliseconds(std::min<std::uint64_t>(secs, 86400) * 1000);
    std::tm tm{};
    std::string s(v);
    if (!strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm)) return std::nullopt;
    auto when = timegm(&tm);
    return std::chrono::milliseconds(when > now ? (when - now) * 1000 : 0);
}

const char* verdict_name(verdict_kind k) noexcept {
    switch (k) {
    case verdict_kind::skip_body: return "skip_body";
    case verdict_kind::read_body: return "read_body";
    case verdict_kind::landed: return "landed";
    case verdict_kind::empty_object: return "empty_object";
    case verdict_kind::redirect: return "redirect";
    case verdict_kind::re_resolve: return "re_resolve";
    case verdict_kind::stale_retry: return "stale_retry";
    case verdict_kind::retry: return "retry";
    case verdict_kind::fail: return "fail";
    }
    return "unknown";
}

verdict judge_head(const range_request& rq, const range_response& rs) {
    if (rs.status != 206) return of_kind(verdict_kind::skip_body);
    auto what = [&] { return describe_range(rq.target, rq.first, rq.length); };
    if (!rq.expect_etag.empty() && !rs.etag.empty() && rs.etag != rq.expect_etag)
        return failed(errc::ObjectChanged,
                      "object changed while being read (ETag " + rq.expect_etag + " became " + rs.etag + "): " + what());
    if (!rq.expect_pin.empty() && (rq.require_pin || !rs.pinned.empty()) && rs.pinned != rq.expect_pin)
        return failed(errc::ObjectChanged, "object changed while being read (" + rq.pin_field + " " + rq.expect_pin +
                                               (rs.pinned.empty() ? ": the answer names none" : " became " + rs.pinned) +
                                               "): " + what());
    const auto cr = parse_content_range(rs.content_range);
    if (!cr || cr->unsatisfied)
        return failed(errc::RangeNotSupported,
                      "206 response without a valid Content-Range ('" + rs.content_range + "') for " + what());
    if (rq.total && cr->total != *rq.total)
        return failed(errc::RangeNotSupported, "Content-Range total " + std::to_string(cr->total) +
                                                   " differs from the object size " + std::to_string(*rq.total) + ": " +
                                                   what());
    // The asked range clipped to the object's end (a first request may ask past it).
    const std::uint64_t end = std::min(rq.first + rq.length, cr->total);
    if (cr->first != rq.first || end <= rq.first || cr->last != end - 1)
        return failed(errc::RangeNotSupported, "server answered with Content-Range 'bytes " + std::to_string(cr->first) +
                                                   "-" + std::to_string(cr->last) + "/" + std::to_string(cr->total) +
                                                   "' to " + what());
    const std::uint64_t expected = end - rq.first;
    if (!rs.content_encoding.empty() && rs.content_encoding != "identity")
        return failed(errc::HttpError, "unexpected Content-Encoding '" + rs.content_encoding + "' for " + what());
    // A chunked body is counted as it is decoded; a plain one must announce the range's size.
    if (!rs.chunked && (!rs.content_length || *rs.content_length != expected))
        return failed(errc::HttpError, "Content-Length " +
                                           (rs.content_length ? std::to_string(*rs.content_length) : std::string("missing")) +
                                           " does not match the asked range: " + what());
    verdict v = of_kind(verdict_kind::read_body);
    v.bytes = expected;
    return v;
}

verdict judge_answer(const remote_object& obj, const range_request& rq, const range_response& rs, const fetch_tally& t,
                     const http_options& o) {
    const unsigned s = rs.status;
    auto what = [&] { return describe_range(rq.target, rq.first, rq.length); };
    if (s == 206) {
        verdict v = judge_head(rq, rs);  // the exchange has read the body only when this said read_body
        if (v.kind != verdict_kind::read_body) return v;
        v.kind = verdict_kind::landed;
        v.learn = !obj.size;  // the first response describes the object
        v.size = rs.total;
        return v;
    }
    if (is_redirect(s)) {
        if (rs.location.empty()) return failed(errc::HttpError, "HTTP " + std::to_string(s) + " without Location for " + what());
        if (t.redirects + 1 > o.max_redirects)
            return failed(errc::HttpError, "more than " + std::to_string(o.max_redirects) + " redirects for " + what());
        verdict v = of_kind(verdict_kind::redirect);
        try {
            v.next = resolve_location(rq.target, rs.location);  // http or https only
        } catch (const error& e) {
            verdict f;
            f.code = e.code();
            f.message = e.message();
            return f;
        }
        // After https anything else is a downgrade; only https -> http can be allowed.
        if (rq.target.scheme == "https" && v.next.scheme != "https" && !(v.next.scheme == "http" && o.allow_https_downgrade))
            return failed(errc::HttpError, "refused a redirect from " + rq.target.shown() + " to " + v.next.shown() +
                                               ": https to " + v.next.scheme + " (allow_https_downgrade permits http)");
        return v;
    }
    // An empty object: "416 bytes */0", or (nginx) a 200 with an empty body, to the first request.
    // A 416 naming a size is recorded too (and then fails below as any 416).
    const bool first_request = !obj.size && rq.first == 0;
    const bool empty_200 = s == 200 && rs.content_length == 0u;
    bool learn = false;
    std::uint64_t size = rs.total;
    if (first_request && (s == 416 || empty_200)) {
        learn = true;
        if (empty_200) size = 0;
        if (size == 0) {
            verdict v = of_kind(verdict_kind::empty_object);
            v.learn = true;
            v.size = 0;
            return v;
        }
    }
    verdict v;
    const bool known = obj.size.has_value() || learn;
    if (s == 412 || (s == 200 && known))
        v = failed(errc::ObjectChanged,
                   "object changed while being read (HTTP " + std::to_string(s) + " to a conditional request): " + what());
    else if (s == 404 && known && !obj.pinned.empty() && obj.pin && rq.target.origin() == obj.requested.origin())
        v = failed(errc::ObjectChanged, "object changed while being read (" + obj.pin->query + " " + obj.pinned +
                                            " is gone: HTTP 404): " + what());
    else if (s == 200)
        v = failed(errc::RangeNotSupported, "server ignored the Range request (HTTP 200 instead of 206): " + what());
    else if ((s == 403 || s == 410) && obj.resolver && rq.target.origin() != obj.requested.origin() && t.refreshes < 3)
        v = of_kind(verdict_kind::re_resolve);
    else if (!is_retryable(s))
        v = failed(errc::HttpError, "HTTP " + std::to_string(s) + " for " + what());
    else {
        v = of_kind(verdict_kind::retry);
        v.message = "HTTP " + std::to_string(s) + (rs.retry_after ? " with Retry-After" : "") + " for " + what();
        v.retry_after = rs.retry_after;
    }
    v.learn = learn;
    v.size = size;
    return v;
}

verdict judge_transport(bool reused, const range_response& rs, bool stale_retry_used, std::string failure) {
    if (reused && rs.status == 0 && !stale_retry_used) return of_kind(verdict_kind::stale_retry);
    verdict v = of_kind(verdict_kind::retry);
    v.message = std::move(failure);
    v.retry_after = rs.retry_after;
    return v;
}

}  // namespace ringsafe::http
