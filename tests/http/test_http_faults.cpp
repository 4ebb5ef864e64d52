// open_url against tests/support/fault_server.cpp: broken connections, stalls, lying
// servers, changing objects and transient failures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <vector>

#include "fault_pattern.hpp"
#include "http_harness.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

constexpr std::uint64_t object_size = (2u << 20) + 333;
constexpr std::size_t guard = 4096;

struct fixture {
    temp_dir tmp;
    fault_server server{tmp.path()};
    int next_id = 0;
    // A URL of a fresh object (its own request counter) with the given fault query.
    std::string url(const std::string& query) {
        return server.base_url() + "/obj?size=" + std::to_string(object_size) + "&id=" + std::to_string(++next_id) +
               (query.empty() ? "" : "&" + query);
    }
    // Body bytes the server sent for the latest object.
    std::uint64_t bytes_sent() {
        std::string st = run_command("curl -s '" + server.base_url() + "/stats?id=" + std::to_string(next_id) + "'").out;
        return std::stoull(st.substr(st.find("bytes ") + 6));
    }
    unsigned requests() {
        std::string st = run_command("curl -s '" + server.base_url() + "/stats?id=" + std::to_string(next_id) + "'").out;
        return static_cast<unsigned>(std::stoul(st.substr(st.find("requests ") + 9)));
    }
};

http_options fast() {
    http_options o;
    o.prefetch = 4096;
    o.chunk_size = 512 << 10;
    o.connections_per_origin = 2;
    o.retry_base_delay = std::chrono::milliseconds(1);
    o.retry_max_delay = std::chrono::milliseconds(5);
    o.stall_timeout = std::chrono::milliseconds(300);
    o.first_byte_timeout = std::chrono::milliseconds(2000);
    return o;
}

// Reads [off, off+len) into a guarded buffer; checks the bytes and that no guard byte changed.
void read_and_check(source& src, std::uint64_t off, std::uint64_t len) {
    std::vector<std::byte> buf(len + 2 * guard, std::byte{0xA5});
    read_op op{off, len, buf.data() + guard, 0};
    src.execute({&op, 1}, {});
    bool same = true;
    for (std::uint64_t i = 0; i < len && same; ++i) same = buf[guard + i] == fault_byte(off + i);
    CHECK(same);
    auto untouched = [](auto b, auto e) { return std::all_of(b, e, [](std::byte x) { return x == std::byte{0xA5}; }); };
    CHECK(untouched(buf.begin(), buf.begin() + guard));
    CHECK(untouched(buf.end() - guard, buf.end()));
}

// Expects execute() of a guarded read to fail with `kind`; returns the message. Guards must stay intact.
std::string read_fails(source& src, std::uint64_t off, std::uint64_t len, errc kind) {
    std::vector<std::byte> buf(len + 2 * guard, std::byte{0xA5});
    read_op op{off, len, buf.data() + guard, 7};
    io_control ctl;
    ctl.describe = [](std::uint32_t tag) { return "tensor #" + std::to_string(tag); };
    std::string msg;
    try {
        src.execute({&op, 1}, ctl);
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == kind);
        msg = e.what();
    }
    auto untouched = [](auto b, auto e) { return std::all_of(b, e, [](std::byte x) { return x == std::byte{0xA5}; }); };
    CHECK(untouched(buf.begin(), buf.begin() + guard));
    CHECK(untouched(buf.end() - guard, buf.end()));
    CHECK(msg.find("tensor #7") != std::string::npos);
    return msg;
}

}  // namespace

TEST_CASE("connection closed or reset after N body bytes: resumed from the last byte received") {
    fixture f;
    http_options o = fast();
    o.connections_per_origin = 1;  // one request chain, so the counts below are exact
    for (const char* fault : {"close", "reset"}) {
        INFO(fault);
        // Requests 2 and 3 (the first chunk's tries) break after 1000 body bytes.
        auto src = open_url(f.url(std::string("fault=") + fault + "&after=1000&skip=1&fail=2"), o);
        read_and_check(*src, 5, 400'000);
        CHECK(f.requests() == 1 + 3);
    }
    // Resuming means later requests ask only for what is missing: the server sent
    // at most the range plus the two broken 1000-byte prefixes per read.
    auto src = open_url(f.url("fault=close&after=100000&skip=1&fail=3"), o);
    read_and_check(*src, 0, 300'000);
    CHECK(f.requests() == 1 + 3);
    CHECK(f.bytes_sent() == 4096 + 300'000);  // a restart per try would have sent 600 000
}

TEST_CASE("resume keeps the bytes already received: progress resets the attempt count") {
    fixture f;
    http_options o = fast();
    o.max_attempts = 2;
    o.connections_per_origin = 1;
    // Every response breaks after 50 000 bytes, yet each try makes progress.
    auto src = open_url(f.url("fault=close&after=50000&skip=1"), o);
    read_and_check(*src, 1000, 400'000);
}

TEST_CASE("a stalled body times out and is resumed; a server that always stalls is reported") {
    fixture f;
    auto src = open_url(f.url("fault=stall&after=7000&skip=1&fail=1"), fast());
    read_and_check(*src, 0, 600'000);
    http_options o = fast();
    o.max_attempts = 2;
    auto stuck = open_url(f.url("fault=stall&after=0&skip=1"), o);
    auto msg = read_fails(*stuck, 0, 100'000, errc::HttpError);
    CHECK(msg.find("stalled") != std::string::npos);
    CHECK(msg.find("bytes 0-99999 of http://127.0.0.1") != std::string::npos);
}

TEST_CASE("a late response header hits the first-byte timeout") {
    fixture f;
    http_options o = fast();
    o.first_byte_timeout = std::chrono::milliseconds(100);
    o.max_attempts = 2;
    auto e = std::string();
    try {
        open_url(f.url("delay_ms=1500"), o);
    } catch (const error& err) {
        CHECK(err.code() == errc::HttpError);
        e = err.what();
    }
    CHECK(e.find("first-byte timeout") != std::string::npos);
}

TEST_CASE("wrong Content-Range, wrong total, longer bodies and ignored ranges are errors, never stray writes") {
    fixture f;
    {
        auto src = open_url(f.url("fault=badrange&skip=1"), fast());
        auto msg = read_fails(*src, 100, 200'000, errc::RangeNotSupported);
        CHECK(msg.find("bytes 101-200100/") != std::string::npos);
        CHECK(msg.find("bytes 100-200099 of") != std::string::npos);
    }
    {
        auto src = open_url(f.url("fault=badtotal&skip=1"), fast());
        auto msg = read_fails(*src, 0, 10'000, errc::RangeNotSupported);
        CHECK(msg.find("total") != std::string::npos);
    }
    {
        auto src = open_url(f.url("fault=longer&skip=1"), fast());
        auto msg = read_fails(*src, 50, 70'000, errc::HttpError);
        CHECK(msg.find("Content-Length 70001") != std::string::npos);
    }
    {
        auto src = open_url(f.url("fault=ignore&skip=1"), fast());
        auto msg = read_fails(*src, 50, 70'000, errc::ObjectChanged);  // a 200 to a conditional range request
    }
    try {
        open_url(f.url("fault=ignore"), fast());
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::RangeNotSupported);
    }
    try {
        open_url(f.url("fault=badrange"), fast());
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::RangeNotSupported);
    }
}

TEST_CASE("an object whose ETag changes, or that fails If-Match, is reported as ObjectChanged") {
    fixture f;
    auto src = open_url(f.url("fault=etag"), fast());
    auto msg = read_fails(*src, 0, 100'000, errc::ObjectChanged);
    CHECK(msg.find("\"v1\"") != std::string::npos);
    auto changed = open_url(f.url("fault=change&skip=1"), fast());
    read_fails(*changed, 0, 100'000, errc::ObjectChanged);
}

TEST_CASE("N transient failures (503 + Retry-After, 429) before success are retried") {
    fixture f;
    auto a = open_url(f.url("fault=503&retry_after=0&fail=2"), fast());
    CHECK(a->size() == object_size);
    read_and_check(*a, 0, object_size);
    auto b = open_url(f.url("fault=429&skip=1&fail=3"), fast());
    read_and_check(*b, 77, 1'000'000);
    http_options o = fast();
    o.max_attempts = 3;
    auto c = open_url(f.url("fault=503&skip=1"), o);
    auto msg = read_fails(*c, 0, 1000, errc::HttpError);
    CHECK(msg.find("giving up after 3 attempts") != std::string::npos);
    CHECK(msg.find("HTTP 503") != std::string::npos);
}

TEST_CASE("a connection that always breaks gives up with the URL and range") {
    fixture f;
    http_options o = fast();
    o.max_attempts = 3;
    auto src = open_url(f.url("fault=reset&after=0&skip=1"), o);
    auto msg = read_fails(*src, 4096, 8192, errc::HttpError);
    CHECK(msg.find("bytes 4096-12287 of " + f.server.base_url() + "/obj?size=") != std::string::npos);
    // Nothing listening: connect failures are retried, then reported.
    std::uint16_t closed = free_port();
    try {
        open_url("http://127.0.0.1:" + std::to_string(closed) + "/x", o);
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::HttpError);
        CHECK(std::string(e.what()).find("cannot connect") != std::string::npos);
    }
}

TEST_CASE("cancellation stops the transfer and reports Cancelled") {
    fixture f;
    http_options o = fast();
    auto src = open_url(f.url("rate=2000000"), o);  // 2 MB/s per connection: slow enough to cancel
    std::vector<std::byte> buf(object_size);
    std::atomic<bool> cancel{false};
    io_control ctl;
    ctl.cancel = &cancel;
    ctl.on_bytes = [&](std::size_t, std::uint64_t) { cancel = true; };
    read_op op{0, object_size, buf.data(), 0};
    try {
        src->execute({&op, 1}, ctl);
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::Cancelled);
    }
}
