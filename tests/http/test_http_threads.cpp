// http_options::threads: a blocking read of a URL over several event loops
// (the calling thread's and threads the read starts and joins), against the
// fault server: exact bytes, resume, the first failure, cancel, validation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
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

constexpr std::size_t guard = 4096;

struct fixture {
    temp_dir tmp;
    fault_server server{tmp.path()};
    int next_id = 0;
    std::string url(std::uint64_t size, const std::string& query) {
        return server.base_url() + "/obj?size=" + std::to_string(size) + "&id=" + std::to_string(++next_id) +
               (query.empty() ? "" : "&" + query);
    }
    std::string stats() { return run_command("curl -s '" + server.base_url() + "/stats?id=" + std::to_string(next_id) + "'").out; }
    std::uint64_t bytes_sent() { const auto st = stats(); return std::stoull(st.substr(st.find("bytes ") + 6)); }
    unsigned requests() { const auto st = stats(); return static_cast<unsigned>(std::stoul(st.substr(st.find("requests ") + 9))); }
    // Connections the server has accepted so far (this /stats request's own included).
    unsigned connections() { const auto st = stats(); return static_cast<unsigned>(std::stoul(st.substr(st.find("connections ") + 12))); }
};

http_options fast(unsigned threads, unsigned connections) {
    http_options o;
    o.threads = threads;
    o.connections_per_origin = connections;
    o.prefetch = 4096;
    o.chunk_size = 16 << 10;
    o.retry_base_delay = std::chrono::milliseconds(1);
    o.retry_max_delay = std::chrono::milliseconds(5);
    o.stall_timeout = std::chrono::milliseconds(2000);
    o.first_byte_timeout = std::chrono::milliseconds(5000);
    return o;
}

bool untouched(const std::vector<std::byte>& buf) {
    auto a5 = [](std::byte x) { return x == std::byte{0xA5}; };
    return std::all_of(buf.begin(), buf.begin() + guard, a5) && std::all_of(buf.end() - guard, buf.end(), a5);
}

// Reads [off, off+len) into a guarded buffer; returns the threads the bytes landed on.
std::set<std::thread::id> read_and_check(source& src, std::uint64_t off, std::uint64_t len) {
    std::vector<std::byte> buf(len + 2 * guard, std::byte{0xA5});
    read_op op{off, len, buf.data() + guard, 0};
    std::mutex m;
    std::set<std::thread::id> on;
    std::atomic<std::uint64_t> landed{0};
    io_control ctl;
    ctl.on_bytes = [&](std::size_t, std::uint64_t n) {
        landed += n;
        std::lock_guard lock(m);
        on.insert(std::this_thread::get_id());
    };
    src.execute({&op, 1}, ctl);
    bool same = true;
    for (std::uint64_t i = 0; i < len && same; ++i) same = buf[guard + i] == fault_byte(off + i);
    CHECK(same);
    CHECK(untouched(buf));
    CHECK(landed == len);
    return on;
}

// Threads of this process now. The first thread ever started may bring a
// runtime's own along (TSan's background thread): one is started and joined
// before the first count, so that counts before and after a read compare.
std::size_t threads_now() {
    static const bool warmed = [] {
        std::thread([] {}).join();
        return true;
    }();
    (void)warmed;
    return user_threads();
}

std::string invalid_argument(const std::function<void()>& f) {
    try {
        f();
    } catch (const error& e) {
        CHECK(e.code() == errc::InvalidArgument);
        return e.what();
    }
    FAIL("no InvalidArgument");
    return "";
}

}  // namespace

TEST_CASE("threads 1, 2, 4 over 64 connections: every byte exact, on that many threads, none left running") {
    fixture f;
    const std::uint64_t size = (32u << 20) + 333;
    const std::size_t before = threads_now();
    for (unsigned threads : {1u, 2u, 4u}) {
        INFO("threads " << threads);
        // delay_ms: every request takes a while, so that each loop's workers get pieces.
        http_options o = fast(threads, 64);
        o.chunk_size = 64 << 10;
        auto src = open_url(f.url(size, "delay_ms=20"), o);
        const auto on = read_and_check(*src, 0, size);
        CHECK(on.size() == threads);
        CHECK(on.count(std::this_thread::get_id()) == 1);  // the calling thread runs loop 0
        CHECK(f.requests() == 1 + (size + (64 << 10) - 1) / (64 << 10));
        CHECK(threads_now() == before);  // the read's threads are joined when it returns
        // A second read (unaligned) on the same source: the loops are used again, and
        // each loop's pool kept its connections (no new ones but the next /stats request's).
        const unsigned connected = f.connections();
        CHECK(read_and_check(*src, 123, size - 456).size() == threads);
        CHECK(f.connections() - connected == 1);
        CHECK(threads_now() == before);
        // Smaller reads (32 requests of 64 KiB) run on as few loops as hold them within
        // their shares (64 / threads connections each: one loop for threads 1 and 2, two
        // for 4), the calling thread's first; each loop's pool keeps them all, none is
        // made anew.
        const unsigned small = f.connections();
        const auto small_on = read_and_check(*src, 5000, 2u << 20);
        CHECK(small_on.size() == (threads == 4 ? 2u : 1u));
        CHECK(small_on.count(std::this_thread::get_id()) == 1);
        read_and_check(*src, 7000, 2u << 20);
        CHECK(f.connections() - small == 1);
        // A read of one request runs on the calling thread alone.
        const auto one = read_and_check(*src, 1000, 60'000);
        CHECK(one.size() == 1);
        CHECK(one.count(std::this_thread::get_id()) == 1);
        CHECK(threads_now() == before);
    }
}

TEST_CASE("threads 2: responses broken after some bytes are resumed from the last byte received, still exact") {
    for (const char* fault : {"close", "reset"}) {
        INFO(fault);
        fixture f;
        http_options o = fast(2, 16);
        o.chunk_size = 64 << 10;
        const std::uint64_t size = (16u << 20) + 333, ranges = (size + (64 << 10) - 1) / (64 << 10);
        // Every range's first try (and some retries) breaks after 20 000 body bytes.
        auto src = open_url(f.url(size, std::string("fault=") + fault + "&after=20000&skip=1&fail=" + std::to_string(ranges)), o);
        REQUIRE(src->size() == size);
        read_and_check(*src, 0, size);
        CHECK(f.requests() > 1 + ranges);
        if (std::string(fault) == "close")  // resumed, not restarted: every byte sent once
            CHECK(f.bytes_sent() == 4096 + size);
    }
}

TEST_CASE("threads 2: a fatal error on one loop stops the other, names the URL, and leaves no thread running") {
    fixture f;
    const std::uint64_t size = (16u << 20) + 333;
    http_options o = fast(2, 2);
    o.chunk_size = 512 << 10;
    o.stall_timeout = std::chrono::milliseconds(600'000);
    // rate=1000: a range takes minutes unless stopped; request 3 (one of the
    // two loops' first) answers a shifted Content-Range, a fatal error.
    const std::string url = f.url(size, "rate=1000&fault=badrange&skip=2&fail=1");
    auto src = open_url(url, o);
    const std::size_t before = threads_now();
    std::vector<std::byte> buf(size + 2 * guard, std::byte{0xA5});
    read_op op{0, size, buf.data() + guard, 9};
    io_control ctl;
    ctl.describe = [](std::uint32_t tag) { return "tensor #" + std::to_string(tag); };
    std::string msg;
    try {
        src->execute({&op, 1}, ctl);
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::RangeNotSupported);
        msg = e.what();
    }
    INFO(msg);
    CHECK(msg.find("tensor #9") != std::string::npos);
    CHECK(msg.find(url.substr(0, url.find('?'))) != std::string::npos);
    CHECK(untouched(buf));
    CHECK(threads_now() == before);
    CHECK(f.requests() == 3);  // the other loop did not go on to another range
}

TEST_CASE("threads 2: cancel mid-read reaches both loops and reports Cancelled") {
    fixture f;
    const std::uint64_t size = (16u << 20) + 333;
    http_options o = fast(2, 4);
    o.chunk_size = 256 << 10;
    auto src = open_url(f.url(size, "rate=1000000"), o);  // 1 MB/s per connection: a read of seconds
    const std::size_t before = threads_now();
    std::vector<std::byte> buf(size + 2 * guard, std::byte{0xA5});
    std::atomic<bool> cancel{false};
    std::atomic<std::uint64_t> landed{0};
    std::mutex m;
    std::set<std::thread::id> on;
    io_control ctl;
    ctl.cancel = &cancel;
    ctl.on_bytes = [&](std::size_t, std::uint64_t n) {
        {
            std::lock_guard lock(m);
            on.insert(std::this_thread::get_id());
            if (on.size() == 2) cancel = true;  // both loops are receiving: cancel
        }
        landed += n;
    };
    read_op op{0, size, buf.data() + guard, 0};
    try {
        src->execute({&op, 1}, ctl);
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::Cancelled);
    }
    CHECK(on.size() == 2);
    CHECK(landed < size / 2);  // neither loop went on to read its ranges
    CHECK(untouched(buf));
    CHECK(threads_now() == before);
    // The source still reads after a cancelled read.
    read_and_check(*src, 1000, 300'000);
}

TEST_CASE("threads: 0 takes RINGSAFE_HTTP_THREADS, else the hardware threads; 1..256, capped at the connections") {
    ::unsetenv("RINGSAFE_HTTP_THREADS");
    http_options o;
    o.connections_per_origin = 256;
    CHECK(o.threads == 0);
    const unsigned hw = std::max(1u, std::min(std::thread::hardware_concurrency(), 256u));
    CHECK(resolved_http_options(o).threads == hw);
    ::setenv("RINGSAFE_HTTP_THREADS", "3", 1);
    CHECK(resolved_http_options(o).threads == 3);
    o.connections_per_origin = 2;  // never more loops than connections
    CHECK(resolved_http_options(o).threads == 2);
    o.threads = 5;  // the caller's value wins over the environment
    o.connections_per_origin = 8;
    CHECK(resolved_http_options(o).threads == 5);
    o.threads = 256;
    o.connections_per_origin = 256;
    CHECK(resolved_http_options(o).threads == 256);
    o.threads = 257;
    CHECK(invalid_argument([&] { resolved_http_options(o); }).find("threads 257 is out of range 1..256") != std::string::npos);
    // open_url names the option, the value and the URL, before any connection (nothing listens on port 1).
    const std::string msg = invalid_argument([&] { open_url("http://127.0.0.1:1/m.safetensors", o); });
    CHECK(msg.find("threads 257") != std::string::npos);
    CHECK(msg.find("http://127.0.0.1:1/m.safetensors") != std::string::npos);
    o.threads = 0;
    for (const char* bad : {"0", "257", "two", "2x", "-1", ""}) {
        INFO(bad);
        ::setenv("RINGSAFE_HTTP_THREADS", bad, 1);
        if (!*bad) {  // empty: as unset
            CHECK(resolved_http_options(o).threads == hw);
            continue;
        }
        CHECK(invalid_argument([&] { resolved_http_options(o); }).find(std::string("RINGSAFE_HTTP_THREADS")) !=
              std::string::npos);
    }
    ::unsetenv("RINGSAFE_HTTP_THREADS");
}

TEST_CASE("cli: --http-threads (and RINGSAFE_HTTP_THREADS) for URL sources") {
    fixture f;
    temp_dir dir;
    // A safetensors file served through the fault server: one U8 tensor "w" of 1 MiB.
    std::vector<std::byte> data(1u << 20);
    fill_pattern(data, 5);
    write_u8_file(dir / "m.safetensors", data);
    const std::string url = f.url(0, "file=" + (dir / "m.safetensors").string());
    auto cli = [&](const std::string& env, const std::string& args) {
        return run_command(env + " '" + cli_path() + "' " + args + " 2>&1");
    };
    for (const char* sub : {"load --json", "verify", "ls"}) {
        INFO(sub);
        const auto r = cli("", std::string(sub) + " --http-threads 2 --connections 4 --chunk 64K '" + url + "'");
        INFO(r.out);
        CHECK(r.status == 0);
    }
    auto r = cli("", "get --http-threads 3 --connections 3 --chunk 64K '" + url + "' w -o '" + (dir / "out").string() + "'");
    CHECK(r.status == 0);
    r = cli("", "cp --http-threads 2 --connections 4 --chunk 64K --no-direct --no-sync '" + url + "' '" +
                    (dir / "copy.safetensors").string() + "'");
    CHECK(r.status == 0);
    const auto copy = read_file(dir / "copy.safetensors");
    REQUIRE(copy.size() >= data.size());
    CHECK(std::equal(data.begin(), data.end(), copy.end() - static_cast<std::ptrdiff_t>(data.size())));
    for (const char* bad : {"0", "257"}) {
        r = cli("", std::string("load --http-threads ") + bad + " '" + url + "'");
        INFO(r.out);
        CHECK(r.status == 2);
        CHECK(r.out.find(std::string("--http-threads ") + bad + " is out of range 1..256") != std::string::npos);
    }
    r = cli("RINGSAFE_HTTP_THREADS=lots", "load '" + url + "'");
    CHECK(r.status != 0);
    CHECK(r.out.find("RINGSAFE_HTTP_THREADS='lots'") != std::string::npos);
    r = cli("RINGSAFE_HTTP_THREADS=2", "load --connections 4 '" + url + "'");
    CHECK(r.status == 0);
}
