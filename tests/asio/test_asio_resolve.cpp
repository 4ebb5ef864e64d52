// Host-name resolution of an async_open against a DNS server that never
// answers (tests/support/silent_dns.hpp: root, a mount namespace of this
// process's own, exits 77 where not allowed): the open fails after
// http_options::connect_timeout with HttpError naming the host, instead of
// waiting for the system resolver. The namespace is entered before any thread
// starts, so the test runs in a process of its own (meson test asio_resolve).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

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
        dns.release();  // lets the abandoned lookup's thread end
    });
    io.run();
    REQUIRE(calls == 1);
    CHECK(asked_before_handler >= 1);  // the resolver did ask this server, which never answered
    CHECK(got == make_error_code(errc::HttpError));
    CHECK(st.code == make_error_code(errc::HttpError));
    CHECK_THAT(st.message, Catch::Contains("ringsafe-resolve-test.invalid") && Catch::Contains("timed out") &&
                               Catch::Contains("connect_timeout"));
}

// The io_context destroyed while a host name is being resolved: the
// destruction does not wait for getaddrinfo (the lookup's thread touches
// nothing of the io_context), and the lookup ends on its own once the name
// server answers, leaving no thread or descriptor (and, under ASan or
// valgrind, touching nothing freed). A process of its own: meson test
// asio_resolve_teardown.
TEST_CASE("asio resolve: destroying the io_context mid-resolution does not wait for the name server",
          "[asio_resolve][teardown]") {
    temp_dir dir;
    silent_dns dns;
    use_name_server(dir, dns.address(), 30);  // before any thread; glibc waits up to 30 s
    dns.start();
    const std::size_t threads_before = user_threads();
    const std::size_t fds_before = open_fds();
    dns.release_after(std::chrono::seconds(20));  // a destruction that waits for getaddrinfo ends too

    reader_options ro;
    ro.source.http.connect_timeout = std::chrono::seconds(60);  // only the destruction ends the open
    bool called = false;
    {
        net::io_context io;
        status st;
        ra::async_open(io.get_executor(), "http://ringsafe-resolve-test.invalid:9/m.safetensors", ro, st,
                       [&](ra::error_code, ra::async_reader) { called = true; });
        CHECK(eventually([&] {
            io.run_for(std::chrono::milliseconds(10));
            return dns.queries() >= 1;  // the lookup is waiting for the name server
        }, std::chrono::seconds(20)));
    }
    const bool answered = dns.released();
    dns.release();
    CHECK_FALSE(called);    // a destroyed io_context runs no handler
    CHECK_FALSE(answered);  // destroyed before the fake DNS answered
    CHECK(eventually([&] { return user_threads() == threads_before; }, std::chrono::seconds(30)));
    CHECK(eventually([&] { return open_fds() == fds_before; }, std::chrono::seconds(30)));
}

// The connections a read opens at once (32 by default), and opens on other
// io_contexts or threads, look up one host together: overlapping lookups of
// one host and port share one getaddrinfo, one thread and one set of queries,
// and every waiter gets the answer. A process of its own: meson test
// asio_resolve_shared.
TEST_CASE("asio resolve: overlapping lookups of one host share one", "[asio_resolve][shared]") {
    temp_dir dir;
    silent_dns dns;
    use_name_server(dir, dns.address(), 30);  // before any thread; glibc waits up to 30 s
    dns.start();
    dns.release_after(std::chrono::seconds(20));  // a lookup that waits for glibc ends too
    const std::string url = "http://ringsafe-resolve-test.invalid:9/m.safetensors";
    reader_options ro;
    ro.source.http.connect_timeout = std::chrono::seconds(60);  // only the name server ends them
    net::io_context io;
    constexpr int opens = 8;
    std::vector<status> st(opens);
    std::vector<ra::error_code> got(opens);
    int calls = 0;
    for (int i = 0; i < opens; ++i)
        ra::async_open(io.get_executor(), url, ro, st[i], [&, i](ra::error_code ec, ra::async_reader r) {
            ++calls;
            got[i] = ec;
            CHECK_FALSE(r.valid());
        });
    // Every open starts its lookup as soon as the io_context runs; give them all time to.
    for (int waited = 0; dns.queries() == 0 && waited < 200; ++waited) io.run_for(std::chrono::milliseconds(50));
    io.run_for(std::chrono::milliseconds(300));
    const unsigned asked = dns.queries();
    const bool answered = dns.released();
    CHECK(calls == 0);  // nobody has an answer yet
    dns.release();      // REFUSED, to every query kept and to come
    io.run();
    CHECK_FALSE(answered);
    CHECK(calls == opens);
    CHECK(asked >= 1);
    CHECK(asked <= 2);  // one lookup: its A and AAAA queries (a lookup each asked 16 times)
    for (int i = 0; i < opens; ++i) {
        CHECK(got[i] == make_error_code(errc::HttpError));
        CHECK_THAT(st[i].message, Catch::Contains("cannot resolve host of " + url));
    }
}
