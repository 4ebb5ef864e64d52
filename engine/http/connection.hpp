// One keep-alive HTTP/1.1 connection (plain TCP or TLS) and the pool of them
// that a remote source keeps per origin. Everything here runs as asynchronous
// operations on the executor the pool was made with.
#pragma once

#include <chrono>
#include <functional>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include "source/abandon_list.hpp"
#include "http/tls_context.hpp"
#include "http/url.hpp"

namespace ringsafe::http {

namespace net = boost::asio;
namespace beast = boost::beast;

// An open connection to one origin. Exactly one of tcp / tls is set.
struct connection {
    url origin;                                                  // scheme, host and port it is connected to
    std::unique_ptr<beast::tcp_stream> tcp;                      // plain http
    std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;   // https
    beast::flat_buffer header_buffer{32u << 10};                 // response header bytes (bounded; body bytes never stay here)
    unsigned requests = 0;                                       // requests sent on it so far
    bool reusable = false;                                       // the last response ended cleanly with keep-alive

    beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *tcp; }
    void close() noexcept;
};

// Thrown for failures of the transport (refused, reset, closed early, timed
// out) that a retry may cure; fatal failures are ringsafe::error.
struct transport_failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Throws InvalidArgument naming `target` unless it can go on a connection as
// it is: an http or https URL whose request target starts with '/'.
void check_request_target(const url& target);

// Keeps idle connections per origin for reuse.
class connection_pool {
public:
    // https origins use the process-wide TLS context for `tls`
    // (shared_tls_context), fetched when the first https connection is made;
    // a pool that only sees http never builds one.
    connection_pool(net::any_io_executor ex, tls_settings tls, std::chrono::milliseconds connect_timeout);

    // An idle connection to `target`'s origin, or a newly connected one: TLS
    // for https, plain TCP for http, any other scheme refused (InvalidArgument)
    // (IP literals are used as they are; host names are resolved by
    // resolve_host, given connect_timeout too). Throws transport_failure (refused, connect
    // timeout) or ringsafe::error (TLS verification; HttpError: unknown host,
    // resolution timed out). When `abandon` is abandoned while a new
    // connection is being made, its socket is closed (its resolution given
    // up) and this throws transport_failure.
    net::awaitable<std::unique_ptr<connection>> acquire(const url& target, detail::abandon_list* abandon = nullptr);
    // Returns a connection; it is kept (up to `max_idle` per origin) only when reusable.
    void release(std::unique_ptr<connection> c, std::size_t max_idle);

private:
    net::any_io_executor ex_;
    tls_settings tls_settings_;
    std::shared_ptr<net::ssl::context> tls_;  // null until the first https connection
    std::chrono::milliseconds connect_timeout_;
    std::map<std::string, std::vector<std::unique_ptr<connection>>> idle_;
};

}  // namespace ringsafe::http
