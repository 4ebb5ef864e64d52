#include "http/range_fetch.hpp"

#include <algorithm>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http/range_exchange.hpp"
#include "http/response_verdict.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::http {
namespace {

// Whether the caller lets header `name` follow redirects to other origins.
bool crosses_origins(const http_options& o, std::string_view name) {
    return std::any_of(o.cross_origin_headers.begin(), o.cross_origin_headers.end(),
                       [&](const std::string& n) { return iequals(n, name); });
}

// The header fields of a request to `target` (obj.location, with the pinned
// version asked for): the caller's fields only for the origin they were given
// for, unless opted in for others; the store's credentials (`fetched`) and
// signature (of `target` as sent) only for the origin it located.
header_fields request_fields(const remote_object& obj, const url& target, const http_options& o, std::string_view range,
                             header_fields fetched) {
    header_fields f;
    const bool same_origin = obj.location.origin() == obj.requested.origin();
    for (auto& h : o.headers)
        if (same_origin || crosses_origins(o, h.first)) f.push_back(h);
    if (!o.bearer_token.empty() && (same_origin || crosses_origins(o, "Authorization")))
        f.emplace_back("Authorization", "Bearer " + o.bearer_token);
    // A resolver's validators belong to the origin that gave them (its CDN), not to the resolver.
    const bool validators = !obj.resolver || obj.etag_origin.empty() || obj.location.origin() == obj.etag_origin;
    if (obj.size && validators) {
        const bool strong_etag = !obj.etag.empty() && !obj.etag.starts_with("W/");
        if (strong_etag) {
            f.emplace_back("If-Match", obj.etag);
            f.emplace_back("If-Range", obj.etag);
        } else if (!obj.last_modified.empty()) {
            f.emplace_back("If-Unmodified-Since", obj.last_modified);
            f.emplace_back("If-Range", obj.last_modified);
        }
    }
    if (same_origin) {
        for (auto& h : fetched) f.push_back(std::move(h));
        if (obj.sign)
            for (auto& h : obj.sign(target, range, f)) f.push_back(std::move(h));
    }
    return f;
}

// Where a request goes: obj.location, asking for the pinned version there.
url request_target(const remote_object& obj) {
    url t = obj.location;
    if (!obj.pinned.empty() && obj.pin && !obj.pin->query.empty() && t.origin() == obj.requested.origin())
        append_query(t, obj.pin->query + "=" + uri_encode(obj.pinned, false));
    return t;
}

// What the first answer (206, or 416 / empty 200 for an empty object) says of the object.
void learn_object(remote_object& obj, const range_response& rs, std::uint64_t size) {
    obj.size = size;
    obj.etag = rs.etag;
    obj.last_modified = rs.last_modified;
    obj.pinned = rs.pinned;
}

std::chrono::milliseconds backoff(const http_options& o, unsigned failures, std::minstd_rand& rng,
                                  std::optional<std::chrono::milliseconds> retry_after) {
    auto d = o.retry_base_delay.count() << std::min(failures - 1, 20u);
    d = std::min<std::int64_t>(d, o.retry_max_delay.count());
    std::uniform_int_distribution<std::int64_t> jitter(d / 2, std::max<std::int64_t>(d, 0));
    std::chrono::milliseconds wait(jitter(rng));
    if (retry_after) wait = std::max(wait, std::min(*retry_after, std::chrono::milliseconds(60'000)));
    return wait;
}

}  // namespace

net::awaitable<std::uint64_t> fetch_range(fetch_context ctx, std::uint64_t first, std::uint64_t length, std::byte* dst,
                                           std::function<void(std::uint64_t)> on_bytes, std::function<bool()> stop) {
    remote_object& obj = ctx.object;
    const http_options& o = ctx.options;
    std::uint64_t done = 0;
    unsigned failures = 0, all_failures = 0, redirects = 0, refreshes = 0;
    bool stale_retry_used = false;
    const unsigned max_attempts = std::max(1u, o.max_attempts);
    const unsigned max_total_attempts = std::max(1u, o.max_total_attempts);
    while (done < length) {
        if (stop && stop()) co_return done;
        range_request rq;
        rq.target = request_target(obj);
        rq.first = first + done;
        rq.length = length - done;
        header_fields fetched;
        if (obj.credentials && obj.location.origin() == obj.requested.origin())
            fetched = co_await obj.credentials->fields(ctx.pool, o, ctx.abandon);
        if (stop && stop()) co_return done;
        rq.fields = request_fields(obj, rq.target, o, range_value(rq.first, rq.length), std::move(fetched));
        rq.total = obj.size;
        rq.expect_etag = obj.size ? obj.etag : std::string();
        rq.pin_field = obj.pin ? obj.pin->field : std::string();
        rq.expect_pin = obj.size ? obj.pinned : std::string();
        rq.require_pin = rq.target.origin() == obj.requested.origin();  // asked for the version by name: must answer it
        rq.dst = dst + done;
        rq.first_byte_timeout = o.first_byte_timeout;
        rq.stall_timeout = o.stall_timeout;
        rq.low_speed_limit = o.low_speed_limit;
        rq.low_speed_time = o.low_speed_time;
        rq.on_bytes = on_bytes;
        rq.stop = stop;
        rq.keep_fields = obj.resolver && obj.resolver->on_answer && rq.target.origin() == obj.requested.origin();
        const std::string what = describe_range(rq.target, rq.first, rq.length);

        range_response rs;
        std::string failure;
        std::unique_ptr<connection> c;
        bool reused = false;
        try {
            c = co_await ctx.pool.acquire(rq.target, ctx.abandon);
            reused = c->requests > 0;
            const detail::abandon_list::entry closing(ctx.abandon, [conn = c.get()] { conn->close(); });
            co_await exchange_range(*c, rq, rs);
        } catch (const transport_failure& e) {
            failure = e.what();
        }
        done += rs.received;
        if (rs.stopped || (!failure.empty() && stop && stop())) co_return done;

        verdict v;
        if (failure.empty()) {
            if (rq.keep_fields) try {
                    obj.resolver->on_answer(obj, rq.target, rs.status, rs.fields);
                } catch (const error& e) {  // the store's verdict, about this request
                    throw error(e.code(), e.message() + " (" + what + ")", e.path());
                }
            if (rs.received > 0) refreshes = 0;
            v = judge_answer(obj, rq, rs, fetch_tally{redirects, refreshes}, o);
            if (v.kind != verdict_kind::landed && c) c->close();
        } else {
            c.reset();
            v = judge_transport(reused, rs, stale_retry_used, std::move(failure));
        }
        if (v.learn) learn_object(obj, rs, v.size);
        switch (v.kind) {
        case verdict_kind::landed:
            if (v.learn) {  // the first response describes the object
                obj.etag_origin = rq.target.origin();
                length = v.bytes;
            }
            ctx.pool.release(std::move(c), std::max(1u, o.connections_per_origin));
            continue;
        case verdict_kind::empty_object: co_return 0;
        case verdict_kind::redirect:
            ++redirects;
            obj.location = std::move(v.next);
            continue;
        case verdict_kind::re_resolve:
            ++refreshes;  // an expired presigned location: back to the resolver for a fresh one
            obj.location = obj.requested;
            continue;
        case verdict_kind::stale_retry:  // an idle connection the server had closed
            stale_retry_used = true;
            continue;
        case verdict_kind::retry: failure = std::move(v.message); break;
        case verdict_kind::fail: throw error(v.code, v.message);
        case verdict_kind::skip_body:  // judge_head's alone
        case verdict_kind::read_body:
            raise(errc::HttpError, std::string("unexpected verdict ") + verdict_name(v.kind) + " for " + what);
        }
        if (stop && stop()) co_return done;
        if (rs.received > 0) failures = 0;
        if (++failures >= max_attempts)
            raise(errc::HttpError, "giving up after " + std::to_string(failures) + " attempts without progress: " + failure);
        if (++all_failures >= max_total_attempts)  // progress or not: a server that always fails after a few bytes
            raise(errc::HttpError, "giving up after " + std::to_string(all_failures) + " failed attempts in all (" +
                                       std::to_string(done) + " of " + std::to_string(length) +
                                       " bytes received): " + failure);
        net::steady_timer timer(co_await net::this_coro::executor);
        timer.expires_after(backoff(o, failures, ctx.random, v.retry_after));
        const detail::abandon_list::entry waking(ctx.abandon, [&timer] { timer.cancel(); });
        boost::system::error_code waited;
        co_await timer.async_wait(net::redirect_error(net::use_awaitable, waited));  // cancelled: `stop` ends the loop
    }
    co_return done;
}

}  // namespace ringsafe::http
