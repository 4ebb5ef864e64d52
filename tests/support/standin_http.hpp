// What the C++ stand-in servers (fault_server, hub_standin) share: listening
// on 127.0.0.1 with a thread per connection, reading a request head, and
// reading a field of it.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>

#include <boost/asio.hpp>

namespace ringsafe::test {

// Listens on 127.0.0.1:`port` (0: any free port), prints "PORT <n>" once
// listening, then runs session(socket) on a thread of its own for every connection.
template <class Session>
[[noreturn]] void serve_loopback(unsigned short port, Session session) {
    namespace asio = boost::asio;
    asio::io_context io;
    asio::ip::tcp::acceptor acceptor(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
    std::printf("PORT %u\n", acceptor.local_endpoint().port());
    std::fflush(stdout);
    for (;;) {
        asio::ip::tcp::socket s(io);
        acceptor.accept(s);
        std::thread(session, std::move(s)).detach();
    }
}

// The next request head from `s` (through "\r\n\r\n"); what was read past it stays in `buf`.
inline std::string read_head(boost::asio::ip::tcp::socket& s, boost::asio::streambuf& buf) {
    const std::size_t n = boost::asio::read_until(s, buf, "\r\n\r\n");
    std::string head(boost::asio::buffers_begin(buf.data()), boost::asio::buffers_begin(buf.data()) + n);
    buf.consume(n);
    return head;
}

// The value of header field `name` (lower case) in the request head `head`,
// leading spaces trimmed; "" when absent.
inline std::string header_value(const std::string& head, const std::string& name) {
    std::string lower = head;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    auto p = lower.find("\r\n" + name + ":");
    if (p == std::string::npos) return "";
    p += name.size() + 3;
    const auto e = head.find("\r\n", p);
    std::string v = head.substr(p, e - p);
    v.erase(0, v.find_first_not_of(' '));
    return v;
}

}  // namespace ringsafe::test
