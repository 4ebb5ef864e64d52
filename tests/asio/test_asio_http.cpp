// include/ringsafe/asio.hpp over HTTP (nginx and tests/support/fault_server.cpp):
// async_read of a remote checkpoint runs on the caller's io_context (no
// thread of its own; progress, per-tensor completion and the handler on the
// thread running it; a timer keeps ticking), cancellation abandons stalled
// requests at once without later writes, and errors name URL and tensor.
// async_open of URLs and URL indexes: reader::open's results and messages,
// no thread, the first request's connection reused, a stalled first request
// that leaves the loop free and is dropped by cancellation.
// The [threads] cases count the process's threads: run them in a process of
// their own (meson test asio_http_threads).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "async_read_checks.hpp"
#include "checkpoint_bytes.hpp"
#include "http_harness.hpp"
#include "open_verdict.hpp"
#include "ringsafe/asio.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;
namespace net = boost::asio;
namespace ra = ringsafe::asio;
using namespace std::chrono_literals;

namespace {

reader_options http_reader(unsigned connections, std::uint64_t chunk = 256u << 10) {
    reader_options ro;
    auto& h = ro.source.http;
    h.prefetch = 4096;
    h.connections_per_origin = connections;
    h.chunk_size = chunk;
    h.retry_base_delay = 1ms;
    h.retry_max_delay = 5ms;
    return ro;
}

// A checkpoint written to <tmp>/www/m.safetensors (served by nginx or the fault server).
struct site {
    temp_dir tmp;
    fs::path root = tmp / "www";
    fs::path file = root / "m.safetensors";
    explicit site(const std::vector<tensor_spec>& ts) {
        fs::create_directories(root);
        write_file(file, build_file(ts).bytes);
    }
};

// One zero-filled buffer per tensor of `sel`.
const ra::error_code aborted = net::error::operation_aborted;

}  // namespace

TEST_CASE("asio http: a read runs on the io_context's thread and starts no thread", "[asio][http][threads]") {
    std::vector<tensor_spec> ts = mixed;
    ts.push_back({"z", "U8", {0}, 0});
    site s(ts);
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    net::io_context io;
    ra::async_reader r(io.get_executor(), reader::open(ng.base_url() + "/m.safetensors", http_reader(4)));
    const std::size_t threads = user_threads();
    const auto me = std::this_thread::get_id();
    auto sel = r.get().all();
    tensor_buffers b(r.get(), sel);

    std::size_t most_threads = threads;
    auto sample = [&] { most_threads = std::max(most_threads, user_threads()); };
    progress_recorder rec(r.get(), sel, b, sample);
    ra::error_code got = make_error_code(errc::IoError);
    std::size_t n = 0;
    bool handler_elsewhere = false;
    ra::async_read(r, sel, b.spans, rec.callbacks(), [&](ra::error_code ec, std::size_t bytes) {
        handler_elsewhere = std::this_thread::get_id() != me;
        sample();
        got = ec;
        n = bytes;
    });
    io.run();
    REQUIRE_FALSE(got);
    CHECK(n == r.get().plan(sel, b.spans).total_bytes());
    CHECK_FALSE(rec.elsewhere);
    CHECK_FALSE(handler_elsewhere);
    CHECK(most_threads == threads);  // no pool thread, no resolver thread, no second event loop
    CHECK(user_threads() == threads);
    CHECK(rec.calls >= 2);
    rec.check_complete(n);
    b.check(r.get(), sel);
}

TEST_CASE("asio http: concurrent reads overlap while a timer keeps ticking on the same thread",
          "[asio][http][threads]") {
    // Eight 128 KiB tensors from a server sending 1 MiB/s per response: each
    // read takes about 125 ms, so a blocked loop would miss many ticks.
    std::vector<tensor_spec> ts;
    for (int i = 0; i < 8; ++i) ts.push_back({"t" + std::to_string(i), "U8", {128u << 10}, 128u << 10});
    site s(ts);
    fault_server server{s.tmp.path()};
    net::io_context io;
    const std::string url = server.base_url() + "/m?rate=1048576&file=" + fs::absolute(s.file).string();
    ra::async_reader r(io.get_executor(), reader::open(url, http_reader(8)));
    const std::size_t threads = user_threads();
    const auto me = std::this_thread::get_id();
    const auto& tensors = r.get().tensors();
    std::vector<std::vector<std::byte>> bufs(tensors.size());
    std::vector<bool> active(tensors.size(), false);
    unsigned outstanding = 0, most_active = 0, ticks = 0, ok = 0;
    bool elsewhere = false;
    std::size_t most_threads = threads;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        bufs[i].resize(tensors[i].size());
        ra::read_callbacks cb;
        cb.on_progress = [&, i](std::uint64_t, std::uint64_t) {
            active[i] = true;
            most_active = std::max<unsigned>(most_active, static_cast<unsigned>(std::count(active.begin(), active.end(), true)));
        };
        ++outstanding;
        ra::async_read(r, r.get().select({tensors[i].name}), {std::span<std::byte>(bufs[i])}, cb,
                       [&, i](ra::error_code ec, std::size_t n) {
                           elsewhere |= std::this_thread::get_id() != me;
                           active[i] = false;
                           --outstanding;
                           if (!ec && n == bufs[i].size()) ++ok;
                       });
    }
    net::steady_timer timer(io);
    std::function<void()> tick = [&] {
        timer.expires_after(5ms);
        timer.async_wait([&](boost::system::error_code) {
            elsewhere |= std::this_thread::get_id() != me;
            most_threads = std::max(most_threads, user_threads());
            if (outstanding == 0) return;
            ++ticks;
            tick();
        });
    };
    tick();
    io.run();
    CHECK(ok == tensors.size());
    CHECK(ticks >= 5);
    CHECK(most_active >= 2);  // the reads ran at the same time, not one after another
    CHECK_FALSE(elsewhere);
    CHECK(most_threads == threads);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        INFO(tensors[i].name);
        CHECK(bufs[i] == tensor_bytes(tensors[i].name, tensors[i].size()));
    }
}

TEST_CASE("asio http: cancellation abandons stalled requests at once, with no later writes", "[asio][http][cancel]") {
    site s({{"small", "U8", {1024}, 1024}, {"big", "U8", {4u << 20}, 4u << 20}});
    fault_server server{s.tmp.path()};
    // stall: after the open, two requests send 64 KiB each and then nothing
    // (until the client closes); trickle: every response at 256 KiB/s.
    const std::string mode = GENERATE(as<std::string>{}, "fault=stall&after=65536&skip=1&fail=2", "rate=262144");
    const auto type = GENERATE(net::cancellation_type::terminal, net::cancellation_type::partial,
                               net::cancellation_type::total);
    static int id = 0;
    const std::string url = server.base_url() + "/m?id=" + std::to_string(++id) + "&" + mode +
                            "&file=" + fs::absolute(s.file).string();
    reader_options ro = http_reader(2, 1u << 20);
    ro.source.http.stall_timeout = 600s;  // only closing the sockets can end the stalled requests
    ro.source.http.first_byte_timeout = 600s;
    net::io_context io;
    ra::async_reader r(io.get_executor(), reader::open(url, ro));
    std::vector<std::byte> buf(4u << 20, std::byte{0xAB});  // guard pattern
    net::cancellation_signal signal;
    ra::read_callbacks cb;
    bool emitted = false;
    cb.on_progress = [&](std::uint64_t done, std::uint64_t) {
        // Cancel mid-read once both requests have delivered their 64 KiB
        // (stall: both are now waiting for bytes that never come).
        if (!emitted && done >= (128u << 10)) signal.emit(type);
        emitted = emitted || done >= (128u << 10);
    };
    // Guards against a hang only: the cancelled read completes in milliseconds.
    net::steady_timer watchdog(io);
    bool hung = false;
    watchdog.expires_after(60s);
    watchdog.async_wait([&](boost::system::error_code ec) {
        if (ec) return;
        hung = true;
        io.stop();
    });
    ra::error_code got;
    std::size_t landed = 0;
    bool ran = false;
    std::vector<std::byte> at_completion;
    ra::async_read(r, r.get().select({"big"}), {std::span<std::byte>(buf)}, cb,
                   net::bind_cancellation_slot(signal.slot(), [&](ra::error_code ec, std::size_t n) {
                       got = ec;
                       landed = n;
                       at_completion = buf;
                       ran = true;
                       watchdog.cancel();
                   }));
    io.run();
    REQUIRE_FALSE(hung);
    REQUIRE(ran);
    CHECK(got == aborted);
    CHECK(landed > 0);
    CHECK(landed < buf.size());
    CHECK(std::count(buf.begin(), buf.end(), std::byte{0xAB}) > 0);
    // The server keeps sending (trickle) or waits for the close (stall): no
    // byte may reach the buffer after the handler ran.
    std::this_thread::sleep_for(100ms);
    io.restart();
    io.poll();
    CHECK(buf == at_completion);
    // The reader stays usable: a later read gets fresh connections and the right bytes.
    std::vector<std::byte> small(1024);
    ra::error_code again = make_error_code(errc::IoError);
    ra::async_read(r, r.get().select({"small"}), {std::span<std::byte>(small)},
                   [&](ra::error_code ec, std::size_t) { again = ec; });
    io.restart();
    io.run();
    CHECK_FALSE(again);
    CHECK(small == tensor_bytes("small", 1024));
}

TEST_CASE("asio http: errors arrive as error codes with the sync path's message", "[asio][http][errors]") {
    site s(mixed);
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    const std::string url = ng.base_url() + "/m.safetensors";
    net::io_context io;
    // One connection: the first failing range is the same for both paths.
    ra::async_reader r(io.get_executor(), reader::open(url, http_reader(1)));
    auto sel = r.get().select({"d"});
    tensor_buffers b(r.get(), sel);
    errc expected{};
    SECTION("the object disappeared (404)") {
        fs::remove(s.file);
        expected = errc::HttpError;
    }
    SECTION("the object changed (new ETag: the conditional request fails)") {
        auto bytes = build_file(mixed).bytes;
        std::reverse(bytes.end() - 1000, bytes.end());
        write_file(s.file, bytes);
        fs::last_write_time(s.file, fs::last_write_time(s.file) + 1h);
        expected = errc::ObjectChanged;
    }
    status st;
    ra::error_code got;
    std::thread::id ran_on;
    ra::async_read(r, sel, b.spans, st, [&](ra::error_code ec, std::size_t) {
        got = ec;
        ran_on = std::this_thread::get_id();
    });
    io.run();
    CHECK(got == make_error_code(expected));
    CHECK(ran_on == std::this_thread::get_id());
    CHECK(st.code == static_cast<std::error_code>(got));
    CHECK(st.message.find(url) != std::string::npos);
    CHECK(st.message.find("tensor 'd'") != std::string::npos);
    CHECK(st.message.find("bytes ") != std::string::npos);
    if (expected == errc::HttpError) CHECK(st.message.find("404") != std::string::npos);
    // The blocking reader reports the same failure in the same words.
    const std::string sync = kind_of([&] { r.get().read(sel, b.spans); });
    REQUIRE(sync != "no error");
    CHECK(sync.substr(sync.find(": ") + 2) == st.message);
}

TEST_CASE("asio http: many concurrent reads, io_context on two threads", "[asio][http][concurrent]") {
    std::vector<tensor_spec> ts;
    for (int i = 0; i < 24; ++i)
        ts.push_back({"t" + std::to_string(i), "U8", {std::uint64_t(20000 + 7919 * i)}, std::uint64_t(20000 + 7919 * i)});
    site s(ts);
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 2, 0});
    net::io_context io;
    ra::async_reader r(io.get_executor(), reader::open(ng.base_url() + "/m.safetensors", http_reader(4, 64u << 10)));
    std::atomic<std::uint64_t> progressed{0};
    ra::read_callbacks cb;
    // Runs inside the reader's strand: a plain counter would do; the atomic is for the final read.
    cb.on_progress = [&](std::uint64_t, std::uint64_t) { progressed.fetch_add(1, std::memory_order_relaxed); };
    read_every_tensor_on_two_threads(io, r, cb);
    CHECK(progressed >= r.get().tensors().size());
}

// A checkpoint of three shards and its index under <tmp>/www/sharded/.
struct sharded_site {
    temp_dir tmp;
    fs::path root = tmp / "www";
    sharded_site() {
        fs::create_directories(root / "sharded");
        write_three_shards(root / "sharded", "model.safetensors.index.json");
    }
};

TEST_CASE("asio http: async_open of a URL and a URL index runs on the caller's thread and starts no thread",
          "[asio][http][open][threads]") {
    sharded_site s;
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    struct open_case {
        std::string url;
        reader_options ro;
        std::string sync;
    };
    std::vector<open_case> cases;
    for (const std::string name : {"sharded/c.safetensors", "sharded/model.safetensors.index.json"})
        for (std::uint64_t prefetch : {std::uint64_t{16}, std::uint64_t{256u << 10}}) {
            open_case c{ng.base_url() + "/" + name, http_reader(4), ""};
            c.ro.source.http.prefetch = prefetch;  // 16: every header and the index take a second read
            c.sync = sync_verdict(c.url, c.ro);
            REQUIRE(c.sync.starts_with("spec "));
            cases.push_back(std::move(c));
        }
    // Counted after the blocking opens (an index's shards open on threads of
    // their own, joined, but under TSan the first of them starts its helper thread).
    const std::size_t threads = user_threads();
    for (auto& c : cases) {
        INFO(c.url << " prefetch " << c.ro.source.http.prefetch);
        CHECK(async_verdict(c.url, c.ro) == c.sync);  // the handler ran on this thread
        CHECK(user_threads() == threads);              // no pool thread, no resolver thread
    }
}

TEST_CASE("asio http: async_open failures give the blocking path's error and message", "[asio][http][open][errors]") {
    sharded_site s;
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    std::string url;
    SECTION("404") { url = ng.base_url() + "/sharded/missing.safetensors"; }
    SECTION("an index whose shard is missing (404)") {
        write_file(s.root / "sharded/bad.index.json", std::string(R"({"weight_map":{"q":"gone.safetensors"}})"));
        url = ng.base_url() + "/sharded/bad.index.json";
    }
    SECTION("a bad URL") { url = "http://[::1/x.safetensors"; }
    SECTION("a refused connection") { url = "http://127.0.0.1:" + std::to_string(free_port()) + "/m.safetensors"; }
    check_same_failure(url, http_reader(2));
}

TEST_CASE("asio http: a stalled first request leaves the io_context free, and cancellation drops it",
          "[asio][http][open][threads]") {
    site s(mixed);
    fault_server server{s.tmp.path()};
    // Every request stalls after the response header: only cancellation ends the open.
    const std::string url = server.base_url() + "/m?fault=stall&after=0&file=" + fs::absolute(s.file).string();
    reader_options ro = http_reader(2);
    ro.source.http.first_byte_timeout = 600s;
    ro.source.http.stall_timeout = 600s;
    const std::size_t threads = user_threads();
    net::io_context io;
    net::cancellation_signal signal;
    status st;
    ra::error_code got;
    bool ran = false, hung = false;
    unsigned ticks = 0;
    std::size_t most = threads;
    net::steady_timer timer(io), watchdog(io);
    watchdog.expires_after(60s);
    watchdog.async_wait([&](boost::system::error_code ec) {
        if (ec) return;
        hung = true;
        io.stop();
    });
    ra::async_open(io.get_executor(), url, ro, st,
                   net::bind_cancellation_slot(signal.slot(), [&](ra::error_code ec, ra::async_reader r) {
                       got = ec;
                       ran = true;
                       CHECK_FALSE(r.valid());
                       timer.cancel();
                       watchdog.cancel();
                   }));
    std::function<void()> tick = [&] {
        timer.expires_after(5ms);
        timer.async_wait([&](boost::system::error_code ec) {
            if (ec || ran) return;
            most = std::max(most, user_threads());
            if (++ticks == 10) signal.emit(net::cancellation_type::terminal);
            tick();
        });
    };
    tick();
    io.run();
    REQUIRE_FALSE(hung);
    REQUIRE(ran);
    CHECK(ticks >= 10);  // the timer kept ticking on the one thread while the open waited
    CHECK(got == net::error::operation_aborted);
    CHECK(st.message.find(url) != std::string::npos);
    CHECK(most == threads);
    CHECK(user_threads() == threads);
}

TEST_CASE("asio http: the reads after async_open reuse the connection of its first request", "[asio][http][open]") {
    site s(mixed);
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    net::io_context io;
    ra::error_code got = make_error_code(errc::IoError);
    std::size_t n = 0;
    net::co_spawn(io, [&]() -> net::awaitable<void> {
        reader_options ro = http_reader(1);  // one connection per origin
        auto r = co_await ra::async_open(io.get_executor(), ng.base_url() + "/m.safetensors", ro, net::use_awaitable);
        auto sel = r.get().all();
        tensor_buffers b(r.get(), sel);
        std::tie(got, n) = co_await ra::async_read(r, sel, b.spans, net::as_tuple(net::use_awaitable));
        b.check(r.get(), sel);
    }, net::detached);
    io.run();
    REQUIRE_FALSE(got);
    CHECK(n > 0);
    const auto log = ng.access_log(2);
    CHECK(log.size() >= 2);                // the open's request, then the read's
    CHECK(ng.connections_logged() == 1);   // both on the executor's one pooled connection
}
