// libFuzzer target: the HTTP Range response path (status line, header fields,
// Content-Range / Content-Length validation, chunked and plain bodies shorter
// or longer than asked). A real loopback TCP server answers one Range GET with
// the fuzzed bytes; exchange_range() must end with a status, a ringsafe::error
// or a transport_failure, and never write outside the asked destination,
// which sits between two guard zones that are checked after every exchange.
//
// Input layout: 6 control bytes (first: u16, length-1: u16 mod 8192, flags),
// then the bytes the server sends before closing its side.
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <exception>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "fuzz_check.hpp"
#include "http/range_exchange.hpp"
#include "ringsafe/error.hpp"

namespace rh = ringsafe::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr std::size_t guard = 4096;
constexpr std::byte guard_byte{0xA5};

struct loopback {
    asio::io_context io;
    tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
};

loopback& server() {
    static loopback* l = new loopback;  // lives for the whole fuzzing process
    return *l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 6) return 0;
    auto& lb = server();
    rh::range_request rq;
    rq.target = rh::parse_url("http://127.0.0.1:8080/model.safetensors");
    rq.first = std::uint64_t(data[0]) | std::uint64_t(data[1]) << 8;
    rq.length = ((std::uint64_t(data[2]) | std::uint64_t(data[3]) << 8) % 8192) + 1;
    const std::uint8_t flags = data[4];
    if (flags & 1) rq.total = rq.first + rq.length + data[5];
    if (flags & 2) rq.expect_etag = "\"abc\"";
    if (flags & 4) rq.stop = [n = 0]() mutable { return ++n > 3; };
    rq.first_byte_timeout = std::chrono::milliseconds(5000);
    rq.stall_timeout = std::chrono::milliseconds(5000);
    std::uint64_t reported = 0;
    rq.on_bytes = [&reported](std::uint64_t n) { reported += n; };
    std::vector<std::byte> memory(guard + rq.length + guard, guard_byte);
    rq.dst = memory.data() + guard;

    // Connected through the io_context: libFuzzer's SIGALRM (every -timeout/2 + 1 s)
    // interrupts blocking connect()/accept() with EINTR, which Asio's reactor retries.
    tcp::socket client(lb.io), peer(lb.io);
    boost::system::error_code connect_ec, accept_ec;
    client.async_connect(lb.acceptor.local_endpoint(), [&](boost::system::error_code e) { connect_ec = e; });
    lb.acceptor.async_accept(peer, [&](boost::system::error_code e) { accept_ec = e; });
    lb.io.run();
    lb.io.restart();
    if (connect_ec || accept_ec) {
        std::fprintf(stderr, "fuzz_http_response: loopback setup failed: %s / %s\n", connect_ec.message().c_str(),
                     accept_ec.message().c_str());
        std::abort();
    }
    const asio::const_buffer response(data + 6, size - 6);

    rh::connection c;
    c.origin = rq.target;
    c.tcp = std::make_unique<boost::beast::tcp_stream>(std::move(client));
    rh::range_response rs;
    std::exception_ptr failure;
    bool threw_expected = false;

    asio::co_spawn(
        lb.io,
        [&]() -> asio::awaitable<void> {
            boost::system::error_code ec;
            co_await asio::async_write(peer, response, asio::redirect_error(asio::use_awaitable, ec));
            peer.shutdown(tcp::socket::shutdown_send, ec);
        },
        [](std::exception_ptr) {});
    asio::co_spawn(lb.io, rh::exchange_range(c, rq, rs), [&](std::exception_ptr e) {
        failure = e;
        boost::system::error_code ec;
        peer.close(ec);  // unblocks a server write the client stopped reading
    });
    lb.io.run();
    lb.io.restart();

    if (failure) {
        try {
            std::rethrow_exception(failure);
        } catch (const ringsafe::error&) {
            threw_expected = true;
        } catch (const rh::transport_failure&) {
            threw_expected = true;
        }
        // Anything else propagates and libFuzzer reports it.
    }
    FUZZ_CHECK(threw_expected || !failure);
    for (std::size_t i = 0; i < guard; ++i) {
        FUZZ_CHECK(memory[i] == guard_byte);
        FUZZ_CHECK(memory[guard + rq.length + i] == guard_byte);
    }
    FUZZ_CHECK(rs.received <= rq.length && rs.expected <= rq.length);
    FUZZ_CHECK(reported == rs.received);
    if (!failure && rs.status == 206 && !rs.stopped) FUZZ_CHECK(rs.received == rs.expected && rs.expected > 0);
    return 0;
}
