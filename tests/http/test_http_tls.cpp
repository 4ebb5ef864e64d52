// The process-wide TLS context cache (engine/http/tls_context.hpp): plain
// http never builds a context (and so never reads ca_file), https builds one
// per (verify_peer, CA file) and still verifies, a replaced CA file is loaded
// again, and an unloadable CA file names itself and the origin.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <string>
#include <vector>

#include "http/tls_context.hpp"
#include "http_harness.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/open_source.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;
using ringsafe::http::tls_contexts_built;

namespace {

struct tls_site {
    temp_dir tmp;
    fs::path root = tmp / "www";
    std::vector<std::byte> data = std::vector<std::byte>(200000);
    tls_site() {
        fill_pattern(data, 3);
        fs::create_directories(root);
        write_file(root / "file.bin", data);
    }
};

}  // namespace

TEST_CASE("plain http builds no TLS context and never reads ca_file") {
    tls_site s;
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    const std::size_t before = tls_contexts_built();
    http_options o;
    o.ca_file = (s.tmp / "no-such-ca.pem").string();  // would fail to load if a context were built
    for (int i = 0; i < 3; ++i) {
        auto src = open_url(ng.base_url() + "/file.bin", o);
        CHECK(read_whole(*src) == s.data);
    }
    auto plain = open_url(ng.base_url() + "/file.bin");
    CHECK(read_whole(*plain) == s.data);
    CHECK(tls_contexts_built() == before);
}

TEST_CASE("https shares one context per CA file, verifies, and reloads a replaced CA file") {
    tls_site s;
    test_ca ca = make_test_ca(s.tmp / "ca");
    test_ca other = make_test_ca(s.tmp / "other");
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", &ca, 1, 0});
    const std::string url = ng.base_url() + "/file.bin";
    REQUIRE(url.starts_with("https://"));

    // A copy of the right CA under a path of our own, so it can be replaced.
    const fs::path trusted = s.tmp / "trusted.pem";
    fs::copy_file(ca.ca_cert, trusted);
    http_options o;
    o.ca_file = trusted.string();
    const std::size_t before = tls_contexts_built();
    for (int i = 0; i < 3; ++i) CHECK(read_whole(*open_url(url, o)) == s.data);
    CHECK(tls_contexts_built() == before + 1);

    // Another CA does not verify the server.
    http_options wrong;
    wrong.ca_file = other.ca_cert.string();
    auto e = expect_error([&] { open_url(url, wrong); });
    CHECK(e.code() == errc::HttpError);
    CHECK(std::string(e.what()).find("certificate verify failed") != std::string::npos);

    // The same path now holding the other CA (a new file): loaded again, and refused.
    const fs::path staging = s.tmp / "staging.pem";
    fs::copy_file(other.ca_cert, staging);
    fs::rename(staging, trusted);
    auto replaced = expect_error([&] { open_url(url, o); });
    CHECK(replaced.code() == errc::HttpError);
    CHECK(std::string(replaced.what()).find("certificate verify failed") != std::string::npos);

    // verify_peer = false is a context of its own and accepts any certificate.
    http_options insecure;
    insecure.verify_peer = false;
    CHECK(read_whole(*open_url(url, insecure)) == s.data);
}

TEST_CASE("an unloadable CA file for https names the file and the origin, and is not cached") {
    tls_site s;
    test_ca ca = make_test_ca(s.tmp / "ca");
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", &ca, 1, 0});
    const fs::path later = s.tmp / "later.pem";
    http_options o;
    o.ca_file = later.string();
    auto e = expect_error([&] { open_url(ng.base_url() + "/file.bin", o); });
    CHECK(e.code() == errc::InvalidArgument);
    CHECK(std::string(e.what()).find(later.string()) != std::string::npos);
    CHECK(std::string(e.what()).find("https://127.0.0.1:" + std::to_string(ng.port())) != std::string::npos);
    // Once the file exists, the same options work: the failure was not remembered.
    fs::copy_file(ca.ca_cert, later);
    CHECK(read_whole(*open_url(ng.base_url() + "/file.bin", o)) == s.data);
}

// A plain-http source used before fork(): the child must not share the
// parent's keep-alive connections or event loop (epoll); both read at once.
TEST_CASE("fork: parent and child read one http source at the same time") {
    tls_site s;
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    http_options o;
    o.chunk_size = 16u << 10;  // many requests per read, on several keep-alive connections
    o.connections_per_origin = 3;
    auto src = open_url(ng.base_url() + "/file.bin", o);
    CHECK(read_whole(*src) == s.data);  // idle connections now in the pool
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::alarm(60);
        bool ok = true;
        try {
            for (int i = 0; i < 30 && ok; ++i) ok = read_whole(*src) == s.data;
        } catch (...) {
            ok = false;
        }
        ::_exit(ok ? 0 : 1);
    }
    bool parent_ok = true;
    for (int i = 0; i < 30 && parent_ok; ++i) parent_ok = read_whole(*src) == s.data;
    int status = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > until) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            FAIL("the child hung");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    CHECK(parent_ok);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(read_whole(*src) == s.data);
}
