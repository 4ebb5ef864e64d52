// libFuzzer target: the verdict on an answer to a Range GET
// (http/response_verdict.hpp), with no I/O. From a fuzzed object, request,
// response header and fetch counters, judge_head, judge_answer and
// judge_transport must return (never throw, never crash) a verdict of the kinds
// each may give, and a body they let land never exceeds the asked length.
//
// Input layout: 15 control bytes, then up to five '\n'-separated strings:
//   [0] flags: 1 size known, 2 resolver, 4 request over https, 8 allow_https_downgrade,
//       16 expect an ETag, 32 pinned version (require_pin when 64), 128 chunked
//   [1] flags: 1 Content-Length present, 2 Retry-After, 4 connection reused,
//       8 stale retry used, 16 request to another origin (a CDN)
//   [2..3] status (mod 1000)  [4..5] first  [6..7] length - 1  [8..9] known size
//   [10..11] Content-Length  [12] redirects so far  [13] refreshes so far  [14] max_redirects
//   strings: Content-Range, Location, ETag, pinned value, Content-Encoding
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/response_verdict.hpp"
#include "ringsafe/error.hpp"

namespace rh = ringsafe::http;
using rh::verdict_kind;

namespace {

std::uint64_t u16(const std::uint8_t* p) { return std::uint64_t(p[0]) | std::uint64_t(p[1]) << 8; }

// The next '\n'-separated piece of `rest` (all of it when none).
std::string next_string(std::string_view& rest) {
    const auto nl = rest.find('\n');
    std::string s(rest.substr(0, nl));
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    return s;
}

bool is_error(const rh::verdict& v) {
    return v.kind == verdict_kind::fail && v.code.category() == ringsafe::make_error_code(ringsafe::errc::HttpError).category() &&
           !v.message.empty();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 15) return 0;
    const std::uint8_t f = data[0], g = data[1];
    std::string_view rest(reinterpret_cast<const char*>(data + 15), size - 15);
    const std::string content_range = next_string(rest), location = next_string(rest), etag = next_string(rest),
                      pinned = next_string(rest), encoding = next_string(rest);

    const bool https = f & 4;
    rh::remote_object obj;
    obj.requested = rh::parse_url(https ? "https://origin.example/m.safetensors" : "http://origin.example/m.safetensors");
    obj.location = obj.requested;
    if (f & 2) obj.resolver.emplace();
    if (f & 1) obj.size = u16(data + 8);
    if (f & 16) obj.etag = "\"e1\"";
    if (f & 32) {
        obj.pin = rh::version_pin{"x-goog-generation", "generation"};
        obj.pinned = "7";
    }

    rh::range_request rq;
    rq.target = (g & 16) ? rh::parse_url(https ? "https://cdn.example/x?sig=1" : "http://cdn.example/x") : obj.location;
    rq.first = u16(data + 4);
    rq.length = u16(data + 6) + 1;
    rq.total = obj.size;
    rq.expect_etag = obj.size ? obj.etag : std::string();
    rq.pin_field = obj.pin ? obj.pin->field : std::string();
    rq.expect_pin = obj.size ? obj.pinned : std::string();
    rq.require_pin = f & 64;

    rh::range_response rs;
    rs.status = static_cast<unsigned>(u16(data + 2) % 1000);
    rs.content_range = content_range;
    if (auto cr = rh::parse_content_range(content_range)) rs.total = cr->total;
    if (g & 1) rs.content_length = u16(data + 10);
    rs.chunked = f & 128;
    if (g & 2) rs.retry_after = std::chrono::milliseconds(u16(data + 10) * 10);
    rs.location = location;
    rs.etag = etag;
    rs.pinned = pinned;
    rs.content_encoding = encoding;

    ringsafe::http_options o;
    o.allow_https_downgrade = f & 8;
    o.max_redirects = data[14] % 16;
    const rh::fetch_tally tally{data[12] % 16u, data[13] % 5u};

    const rh::verdict head = rh::judge_head(rq, rs);
    FUZZ_CHECK(head.kind == verdict_kind::skip_body || head.kind == verdict_kind::read_body || is_error(head));
    FUZZ_CHECK(head.kind != verdict_kind::skip_body || rs.status != 206);
    if (head.kind == verdict_kind::read_body) FUZZ_CHECK(head.bytes > 0 && head.bytes <= rq.length);

    const rh::verdict v = rh::judge_answer(obj, rq, rs, tally, o);
    switch (v.kind) {
    case verdict_kind::landed:
        FUZZ_CHECK(rs.status == 206 && v.bytes > 0 && v.bytes <= rq.length);
        FUZZ_CHECK(head.kind == verdict_kind::read_body && head.bytes == v.bytes);
        break;
    case verdict_kind::empty_object: FUZZ_CHECK(!obj.size && rq.first == 0 && v.learn && v.size == 0); break;
    case verdict_kind::redirect:
        FUZZ_CHECK(tally.redirects < o.max_redirects);
        FUZZ_CHECK(v.next.scheme == "https" || (v.next.scheme == "http" && (!https || o.allow_https_downgrade)));
        break;
    case verdict_kind::re_resolve: FUZZ_CHECK(obj.resolver && tally.refreshes < 3); break;
    case verdict_kind::retry: FUZZ_CHECK(!v.message.empty() && (rs.status >= 500 || rs.status == 408 || rs.status == 429)); break;
    case verdict_kind::fail: FUZZ_CHECK(is_error(v)); break;
    case verdict_kind::skip_body:
    case verdict_kind::read_body:
    case verdict_kind::stale_retry: FUZZ_CHECK(!"judge_answer gave a verdict it never gives"); break;
    default: FUZZ_CHECK(!"not a verdict kind");
    }
    FUZZ_CHECK(!v.learn || !obj.size);  // a known object is never learned again
    FUZZ_CHECK(std::string_view(rh::verdict_name(v.kind)) != "unknown");

    const rh::verdict t = rh::judge_transport(g & 4, rs, g & 8, "connection lost");
    FUZZ_CHECK(t.kind == verdict_kind::stale_retry || (t.kind == verdict_kind::retry && t.message == "connection lost"));
    FUZZ_CHECK(t.kind != verdict_kind::stale_retry || ((g & 4) && rs.status == 0 && !(g & 8)));
    return 0;
}
