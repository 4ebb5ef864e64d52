// Host-name resolution of an async_open against a DNS server that never
// answers (tests/support/silent_dns.hpp: root, a mount namespace of this
// process's own, exits 77 where not allowed): the open fails after
// http_options::connect_timeout with HttpError naming the host, instead of
// waiting for the system resolver. The namespace is entered before any thread
// starts, so the test runs in a process of its own (meson test asio_resolve).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include <boost/asio/io_context.hpp>

#include "ringsafe/asio.hpp"
#include "silent_dns.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace net = boost::asio;
namespace ra = ringsafe::asio;

TEST_CASE("asio resolve: a name server that never answers fails the open after connect_timeout",
          "[asio_resolve]") {
    temp_dir dir;
    silent_dns dns;
    use_name_server(dir, dns.address());  // before any thread
    dns.start();
    const std::string url = "http://ringsafe-resolve-test.invalid:9/m.safetensors";
    reader_options ro;
    ro.source.http.connect_timeout = std::chrono::milliseconds(200);
    net::io_context io;
    status st;
    ra::error_code got;
    int calls = 0;
    unsigned asked_before_handler = 0;
    ra::async_open(io.get_executor(), url, ro, st, [&](ra::error_code ec, ra::async_reader r) {
        ++calls;
        got = ec;
        asked_before_handler = dns.queries();
        CHECK_FALSE(r.valid());
        dns.release();  // lets the abandoned getaddrinfo return, and io.run() with it
    });
    io.run();
    REQUIRE(calls == 1);
    CHECK(asked_before_handler >= 1);  // the resolver did ask this server, which never answered
    CHECK(got == make_error_code(errc::HttpError));
    CHECK(st.code == make_error_code(errc::HttpError));
    CHECK_THAT(st.message, Catch::Contains("ringsafe-resolve-test.invalid") && Catch::Contains("timed out") &&
                               Catch::Contains("connect_timeout"));
}

