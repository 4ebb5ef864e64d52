// Host-name resolution of a blocking open against a DNS server that never
// answers (tests/support/silent_dns.hpp: root, a mount namespace of this
// process's own, exits 77 where not allowed): reader::open fails after
// http_options::connect_timeout with HttpError naming the URL, instead of
// waiting for the system resolver; the abandoned lookup ends on its own once
// the name server answers, and leaves no thread or descriptor behind. The
// namespace is entered before any thread starts, so the test runs in a
// process of its own (meson test http_resolve).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "ringsafe/reader.hpp"
#include "silent_dns.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

TEST_CASE("http resolve: a blocking open fails after connect_timeout, before the name server answers",
          "[http_resolve]") {
    temp_dir dir;
    silent_dns dns;
    use_name_server(dir, dns.address(), 30);  // before any thread; glibc waits up to 30 s
    dns.start();
    const std::size_t threads_before = user_threads();
    const std::size_t fds_before = open_fds();

    // The name server answers (REFUSED) 20 s from now at the latest, so that
    // an open that waits for getaddrinfo ends too (and fails the checks).
    dns.release_after(std::chrono::seconds(20));

    const std::string url = "http://ringsafe-resolve-test.invalid:9/m.safetensors";
    reader_options ro;
    ro.source.http.connect_timeout = std::chrono::milliseconds(200);
    const auto start = std::chrono::steady_clock::now();
    const std::string got = kind_of([&] { (void)reader::open(url, ro); });
    const bool answered = dns.released();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    UNSCOPED_INFO("reader::open took " << took.count() << " ms");
    dns.release();  // the name server answers now

    CHECK_FALSE(answered);  // returned before the fake DNS answered
    CHECK(dns.queries() >= 1);  // the lookup did ask this server
    CHECK_THAT(got, Catch::StartsWith("HttpError: ") && Catch::Contains(url) && Catch::Contains("timed out") &&
                        Catch::Contains("connect_timeout"));
    // The abandoned lookup ends once getaddrinfo returns (REFUSED, now),
    // closing its eventfd; nothing of the open is left.
    CHECK(eventually([&] { return user_threads() == threads_before; }, std::chrono::seconds(30)));
    CHECK(eventually([&] { return open_fds() == fds_before; }, std::chrono::seconds(30)));
    // A name server that answers (REFUSED): the lookup's failure is the open's.
    CHECK_THAT(kind_of([&] { (void)reader::open(url, ro); }),
               Catch::StartsWith("HttpError: ") && Catch::Contains("cannot resolve host of " + url));
}
