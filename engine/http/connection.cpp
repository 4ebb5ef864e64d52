#include "http/connection.hpp"

#include "http/host_lookup.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <openssl/ssl.h>

#include "ringsafe/error.hpp"

namespace ringsafe::http {

void connection::close() noexcept {
    boost::system::error_code ec;
    lowest().socket().close(ec);
    reusable = false;
}

connection_pool::connection_pool(net::any_io_executor ex, tls_settings tls, std::chrono::milliseconds connect_timeout)
    : ex_(std::move(ex)), tls_settings_(std::move(tls)), connect_timeout_(connect_timeout) {}

void check_request_target(const url& target) {
    if (target.scheme != "http" && target.scheme != "https")
        raise(errc::InvalidArgument, "refused to connect for " + target.shown() + ": only http and https are spoken, not " +
                                         target.scheme);
    if (target.target.empty() || target.target.front() != '/')
        raise(errc::InvalidArgument, "refused to request " + target.shown() + ": the request target does not start with '/'");
}

net::awaitable<std::unique_ptr<connection>> connection_pool::acquire(const url& target, detail::abandon_list* abandon) {
    check_request_target(target);  // never plain TCP for a scheme other than http, TLS for https
    auto& idle = idle_[target.origin()];
    if (!idle.empty()) {
        auto c = std::move(idle.back());
        idle.pop_back();
        co_return c;
    }
    auto c = std::make_unique<connection>();
    c->origin = target;
    const std::string where = target.origin();
    if (target.scheme == "https") {  // check_request_target: else http
        if (!tls_) tls_ = shared_tls_context(tls_settings_, where);
        c->tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(ex_, *tls_);
    } else {
        c->tcp = std::make_unique<beast::tcp_stream>(ex_);
    }
    boost::system::error_code ec;
    const detail::abandon_list::entry closing(abandon, [conn = c.get()] { conn->close(); });
    if (abandon && abandon->abandoned()) throw transport_failure("connecting to " + where + " was abandoned");
    // An IP literal needs no lookup (a thread of its own: http/host_lookup.hpp).
    const auto literal = net::ip::make_address(target.host, ec);
    if (!ec) {
        c->lowest().expires_after(connect_timeout_);
        co_await c->lowest().async_connect(net::ip::tcp::endpoint(literal, target.port),
                                           net::redirect_error(net::use_awaitable, ec));
    } else {
        ec = {};
        const auto endpoints = co_await resolve_host(target, connect_timeout_, abandon);
        c->lowest().expires_after(connect_timeout_);
        co_await c->lowest().async_connect(endpoints, net::redirect_error(net::use_awaitable, ec));
    }
    if (abandon && abandon->abandoned()) throw transport_failure("connecting to " + where + " was abandoned");
    if (ec) throw transport_failure("cannot connect to " + where + ": " + ec.message());
    c->lowest().socket().set_option(net::ip::tcp::no_delay(true), ec);
    if (c->tls) {
        if (!target.ipv6 && target.host.find_first_not_of("0123456789.") != std::string::npos)
            SSL_set_tlsext_host_name(c->tls->native_handle(), target.host.c_str());  // SNI
        if (SSL_CTX_get_verify_mode(SSL_get_SSL_CTX(c->tls->native_handle())) != SSL_VERIFY_NONE)
            c->tls->set_verify_callback(net::ssl::host_name_verification(target.host));
        c->lowest().expires_after(connect_timeout_);
        co_await c->tls->async_handshake(net::ssl::stream_base::client, net::redirect_error(net::use_awaitable, ec));
        if (ec == beast::error::timeout) throw transport_failure("TLS handshake with " + where + " timed out");
        if (ec) {
            if (ec.category() == net::error::get_ssl_category())
                raise(errc::HttpError, "TLS handshake with " + where + " failed: " + ec.message());
            throw transport_failure("TLS handshake with " + where + " failed: " + ec.message());
        }
    }
    co_return c;
}

void connection_pool::release(std::unique_ptr<connection> c, std::size_t max_idle) {
    if (!c || !c->reusable) return;
    auto& idle = idle_[c->origin.origin()];
    if (idle.size() < max_idle) idle.push_back(std::move(c));
}

}  // namespace ringsafe::http
