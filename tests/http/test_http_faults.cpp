// open_url against tests/support/fault_server.cpp: broken connections, stalls, lying
// servers, changing objects and transient failures.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "fault_pattern.hpp"
#include "http_harness.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/open_source.hpp"
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

TEST_CASE("a malformed response header fails at once, not after max_attempts tries") {
    fixture f;
    http_options o = fast();
    o.max_attempts = 6;
    o.retry_base_delay = std::chrono::milliseconds(200);  // six tries would take seconds
    auto src = open_url(f.url("fault=badheader&skip=1"), o);
    auto msg = read_fails(*src, 4096, 8192, errc::HttpError);
    CHECK(msg.find("malformed response header") != std::string::npos);
    CHECK(msg.find("bytes 4096-12287 of " + f.server.base_url() + "/obj?size=") != std::string::npos);
    CHECK(f.requests() == 2);  // the open, then one try
}

TEST_CASE("a body slower than low_speed_limit is dropped and resumed; failed tries are bounded in all") {
    fixture f;
    http_options o = fast();
    o.connections_per_origin = 1;
    o.low_speed_limit = 10'000;  // bytes/s, averaged over a window of
    o.low_speed_time = std::chrono::milliseconds(500);
    o.max_total_attempts = 3;
    // Every try after the open drips 200 bytes/s: never a stall (stall_timeout 300 ms), and
    // each try makes progress, so max_attempts (tries without progress) never trips.
    auto src = open_url(f.url("fault=slow&slow_rate=200&skip=1"), o);
    const auto t0 = std::chrono::steady_clock::now();
    auto msg = read_fails(*src, 4096, 100'000, errc::HttpError);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));  // at 200 B/s it would take 500 s
    CHECK(msg.find("slower than 10000 bytes/s over 500 ms") != std::string::npos);
    CHECK(msg.find("3 failed attempts in all") != std::string::npos);
    INFO(msg);  // names the range still missing when it gave up: it resumed after the dripped bytes
    CHECK(msg.find("-104095 of " + f.server.base_url() + "/obj?size=") != std::string::npos);
    CHECK(msg.find("bytes 4096-") == std::string::npos);
    CHECK(f.requests() == 1 + 3);

    // Slow once, then at full speed: resumed after the dripped bytes, exact.
    auto once = open_url(f.url("fault=slow&slow_rate=200&skip=1&fail=1"), o);
    read_and_check(*once, 0, 300'000);
    CHECK(f.requests() == 1 + 2);

    // low_speed_limit 0: no speed check; the drip is only slow.
    http_options off = o;
    off.low_speed_limit = 0;
    auto patient = open_url(f.url("fault=slow&slow_rate=4000&skip=1&fail=1"), off);
    read_and_check(*patient, 0, 4000);
    CHECK(f.requests() == 1 + 1);
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

namespace {

// Connections the fault server has accepted so far (the /stats request's own included).
unsigned connections_accepted(fixture& f) {
    std::string st = run_command("curl -s '" + f.server.base_url() + "/stats?id=0'").out;
    return static_cast<unsigned>(std::stoul(st.substr(st.find("connections ") + 12)));
}

}  // namespace

TEST_CASE("64 connections per origin: every byte exact, 64 connections used") {
    fixture f;
    http_options o = fast();
    o.connections_per_origin = 64;
    o.chunk_size = 16 << 10;  // 2 MiB in 129 requests of 16 KiB: every connection gets work
    auto src = open_url(f.url(""), o);
    const unsigned before = connections_accepted(f);
    read_and_check(*src, 0, object_size);
    // 63 new (the open's connection is reused), plus the next /stats request's own.
    const unsigned made = connections_accepted(f) - before - 1;
    CHECK(made <= 63);
    CHECK(made >= 32);
    CHECK(f.requests() == 1 + (object_size + (16 << 10) - 1) / (16 << 10));
    // A second read reuses the pooled connections.
    const unsigned again = connections_accepted(f);
    read_and_check(*src, 123, object_size - 456);
    CHECK(connections_accepted(f) - again - 1 == 0);
}

TEST_CASE("64 connections, each response broken once: resumed after the bytes received, still exact") {
    for (const char* fault : {"close", "reset"}) {
        INFO(fault);
        fixture f;
        http_options o = fast();
        o.connections_per_origin = 64;
        o.chunk_size = 64 << 10;
        // 8 MiB in 129 ranges of 64 KiB; the first 129 requests after the open
        // break after 20 000 body bytes (every range's first try, and some retries).
        const std::uint64_t size = (8u << 20) + 333, ranges = (size + (64 << 10) - 1) / (64 << 10);
        auto src = open_url(f.url("size=" + std::to_string(size) + "&fault=" + fault + "&after=20000&skip=1&fail=" +
                                  std::to_string(ranges)), o);
        REQUIRE(src->size() == size);
        read_and_check(*src, 0, size);
        CHECK(f.requests() > 1 + ranges);
        if (std::string(fault) == "close")  // resumed, not restarted: every byte sent once (a reset may drop some in flight)
            CHECK(f.bytes_sent() == 4096 + size);
    }
}

TEST_CASE("cli: --connections and --chunk (and RINGSAFE_CONNECTIONS / RINGSAFE_CHUNK) for URL sources") {
    fixture f;
    temp_dir dir;
    // A safetensors file served through the fault server: one U8 tensor "w" of 1 MiB.
    std::vector<std::byte> data(1u << 20);
    fill_pattern(data, 3);
    write_u8_file(dir / "m.safetensors", data);
    auto url = [&] { return f.url("file=" + (dir / "m.safetensors").string()); };
    // One event loop, so that the connection counts below are exact: a second loop starts on a
    // new thread and may find the queue drained already, opening fewer connections than allowed.
    auto cli = [&](const std::string& env, const std::string& args) {
        return run_command("RINGSAFE_HTTP_THREADS=1 " + env + " '" + cli_path() + "' " + args + " 2>&1");
    };
    // --connections 3 --chunk 64K: 16 ranges over 3 connections (the open's reused).
    unsigned before = connections_accepted(f);
    auto r = cli("", "load --json --connections 3 --chunk 64K '" + url() + "'");
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("\"bytes\":1048576") != std::string::npos);
    // load opens twice: a sizing probe (one request, one connection), then the
    // timed run (its open's connection reused by one of the 3 workers).
    CHECK(connections_accepted(f) - before - 1 == 1 + 3);
    CHECK(f.requests() == 1 + 1 + 16);

    // The environment when no flag is given; the flag over the environment.
    before = connections_accepted(f);
    r = cli("RINGSAFE_CONNECTIONS=5 RINGSAFE_CHUNK=64K", "get '" + url() + "' w -o '" + (dir / "out").string() + "'");
    REQUIRE(r.status == 0);
    CHECK(connections_accepted(f) - before - 1 == 5);
    CHECK(f.requests() == 1 + 16);
    CHECK(read_file(dir / "out" / "w.npy").size() > data.size());
    before = connections_accepted(f);
    r = cli("RINGSAFE_CONNECTIONS=5 RINGSAFE_CHUNK=64K", "verify --connections 2 --chunk 128K '" + url() + "'");
    REQUIRE(r.status == 0);
    CHECK(connections_accepted(f) - before - 1 == 2);
    CHECK(f.requests() == 1 + 8);
    r = cli("", "ls --connections 64 --chunk 1M '" + url() + "'");
    CHECK(r.status == 0);
    CHECK(r.out.find("w") != std::string::npos);
    r = cli("", "cp --connections 4 --chunk 256K --no-direct --no-sync '" + url() + "' '" +
                    (dir / "copy.safetensors").string() + "'");
    CHECK(r.status == 0);
    const auto copy = read_file(dir / "copy.safetensors");  // the header may be laid out anew; the bytes are the same
    REQUIRE(copy.size() >= data.size());
    CHECK(std::equal(data.begin(), data.end(), copy.end() - static_cast<std::ptrdiff_t>(data.size())));

    // Bad values: usage errors (exit 2) naming the option; a bad variable names itself (exit 1).
    for (std::string cmd : {"load", "ls", "verify", "get", "cp"}) {
        INFO(cmd);
        const std::string tail = cmd == "get" ? " w -o x" : cmd == "cp" ? " out" : "";
        r = cli("", cmd + " --connections 0 '" + url() + "'" + tail);
        CHECK(r.status == 2);
        CHECK(r.out.find("--connections 0 is out of range 1..256") != std::string::npos);
        r = cli("", cmd + " --connections 257 '" + url() + "'" + tail);
        CHECK(r.status == 2);
        r = cli("", cmd + " --connections many '" + url() + "'" + tail);
        CHECK(r.status == 2);
        r = cli("", cmd + " --chunk 1K '" + url() + "'" + tail);
        CHECK(r.status == 2);
        CHECK(r.out.find("--chunk 1K") != std::string::npos);
        r = cli("", cmd + " --help");
        CHECK(r.out.find("--connections N") != std::string::npos);
        CHECK(r.out.find("RINGSAFE_CHUNK") != std::string::npos);
    }
    r = cli("RINGSAFE_CONNECTIONS=lots", "ls '" + url() + "'");
    CHECK(r.status == 1);
    CHECK(r.out.find("RINGSAFE_CONNECTIONS='lots'") != std::string::npos);
}

TEST_CASE("cli: --speed-limit and --speed-time") {
    fixture f;
    temp_dir dir;
    std::vector<std::byte> data(1000);
    fill_pattern(data, 4);
    write_u8_file(dir / "m.safetensors", data);
    // The first response (the open) drips 200 bytes/s: about 6 s for the whole small file.
    auto url = [&] { return f.url("file=" + (dir / "m.safetensors").string() + "&fault=slow&slow_rate=200&fail=1"); };
    auto cli = [&](const std::string& args) { return run_command("'" + cli_path() + "' " + args + " 2>&1"); };
    auto r = cli("ls --speed-limit 1M --speed-time 1 '" + url() + "'");
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(f.requests() == 2);  // dropped after a second, resumed at full speed
    CHECK(cli("ls --speed-time 0 '" + url() + "'").status == 2);
    CHECK(cli("ls --speed-limit lots '" + url() + "'").status == 2);
}
