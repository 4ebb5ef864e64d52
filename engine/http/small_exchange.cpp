#include "http/small_exchange.hpp"

#include <algorithm>
#include <random>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http.hpp>

#include "ringsafe/error.hpp"

namespace ringsafe::http {
namespace bhttp = beast::http;  // Beast's HTTP, not this namespace
namespace {

template <class Stream>
net::awaitable<void> run(connection& c, Stream& stream, const small_request& rq, small_response& out,
                         std::chrono::milliseconds timeout, bool& too_long) {
    using net::redirect_error, net::use_awaitable;
    boost::system::error_code ec;
    c.reusable = false;
    check_request_target(rq.target);
    bhttp::request<bhttp::string_body> req{rq.method == "POST" ? bhttp::verb::post : bhttp::verb::get, rq.target.target, 11};
    req.set(bhttp::field::host, rq.target.authority());
    req.set(bhttp::field::user_agent, "ringsafe/0.1");
    for (auto& [k, v] : rq.fields) req.set(k, v);
    req.body() = rq.body;
    if (rq.method == "POST" || !rq.body.empty()) req.prepare_payload();
    req.keep_alive(true);
    ++c.requests;
    c.lowest().expires_after(timeout);
    co_await bhttp::async_write(stream, req, redirect_error(use_awaitable, ec));
    if (ec) throw transport_failure("sending the request failed (" + ec.message() + ")");
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(max_small_body);
    co_await bhttp::async_read(stream, c.header_buffer, parser, redirect_error(use_awaitable, ec));
    if (ec == bhttp::error::body_limit) {
        too_long = true;
        co_return;
    }
    if (ec) throw transport_failure("reading the answer failed (" + ec.message() + ")");
    c.lowest().expires_never();
    auto& res = parser.get();
    out.status = res.result_int();
    out.content_type = std::string(res[bhttp::field::content_type]);
    out.body = std::move(res.body());
    c.reusable = res.keep_alive();
}

bool retryable(unsigned s) { return s == 408 || s == 429 || s >= 500; }

}  // namespace

net::awaitable<small_response> exchange_small(connection_pool& pool, const small_request& rq, const http_options& o,
                                              detail::abandon_list* abandon, const std::string& what) {
    const std::string where = what + " (" + rq.target.origin() + std::string(split_target(rq.target.target).path) + ")";
    std::minstd_rand rng(std::random_device{}());
    const unsigned attempts = std::max(1u, o.max_attempts);
    std::string failure;
    small_response out;
    for (unsigned attempt = 1;; ++attempt) {
        if (abandon && abandon->abandoned()) raise(errc::HttpError, where + " was abandoned");
        out = {};
        bool too_long = false;
        failure.clear();
        std::unique_ptr<connection> c;
        try {
            c = co_await pool.acquire(rq.target, abandon);
            const detail::abandon_list::entry closing(abandon, [conn = c.get()] { conn->close(); });
            if (c->tls)
                co_await run(*c, *c->tls, rq, out, o.first_byte_timeout, too_long);
            else
                co_await run(*c, *c->tcp, rq, out, o.first_byte_timeout, too_long);
        } catch (const transport_failure& e) {
            failure = e.what();
        }
        if (too_long) raise(errc::HttpError, where + ": the answer is longer than " + std::to_string(max_small_body) + " bytes");
        if (failure.empty()) {
            pool.release(std::move(c), std::max(1u, o.connections_per_origin));
            if (!retryable(out.status) || attempt >= attempts) co_return out;
            failure = "HTTP " + std::to_string(out.status);
        }
        if (abandon && abandon->abandoned()) raise(errc::HttpError, where + " was abandoned");
        if (attempt >= attempts)
            raise(errc::HttpError, where + " failed after " + std::to_string(attempt) + " attempts: " + failure);
        auto d = o.retry_base_delay.count() << std::min(attempt - 1, 20u);
        d = std::min<std::int64_t>(d, o.retry_max_delay.count());
        std::uniform_int_distribution<std::int64_t> jitter(d / 2, std::max<std::int64_t>(d, 0));
        net::steady_timer timer(co_await net::this_coro::executor);
        timer.expires_after(std::chrono::milliseconds(jitter(rng)));
        const detail::abandon_list::entry waking(abandon, [&timer] { timer.cancel(); });
        boost::system::error_code waited;
        co_await timer.async_wait(net::redirect_error(net::use_awaitable, waited));
    }
}

}  // namespace ringsafe::http
