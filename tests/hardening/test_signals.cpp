// Signals: a process that loads checkpoints also receives signals (a profiler's
// SIGPROF, SIGCHLD, timers, libFuzzer's SIGALRM). Every blocking call of the
// engine must resume after EINTR rather than fail or give up on I/O in flight.
// A sprayer thread sends SIGUSR1, handled without SA_RESTART, to every thread
// of the process (the kernel's io_uring workers aside) every 50 µs while
// readers and writers run; every byte is checked.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "checkpoint_bytes.hpp"
#include "http_harness.hpp"
#include "ringsafe/asio.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"
#include "skip.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
using namespace ringsafe::asio;
namespace fs = std::filesystem;
namespace ba = boost::asio;

namespace {

std::atomic<std::uint64_t> handled{0};

extern "C" void count_signal(int) { handled.fetch_add(1, std::memory_order_relaxed); }

// Installs the handler (no SA_RESTART: interrupted calls return EINTR) and
// signals every user thread until destroyed; restores the old handler.
class signal_spray {
public:
    signal_spray() {
        struct sigaction sa {};
        sa.sa_handler = count_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = 0;
        ::sigaction(SIGUSR1, &sa, &old_);
        const int self = static_cast<int>(::getpid());
        thread_ = std::thread([this, self] {
            const int me = static_cast<int>(::syscall(SYS_gettid));
            std::vector<int> tids;
            for (unsigned round = 0; !stop_.load(); ++round) {
                if (round % 64 == 0) tids = user_thread_ids();  // threads come and go; /proc is slow
                for (int tid : tids)
                    if (tid != me && ::syscall(SYS_tgkill, self, tid, SIGUSR1) == 0) ++sent_;
                std::this_thread::sleep_for(std::chrono::microseconds(50));
            }
        });
    }
    ~signal_spray() {
        stop_ = true;
        thread_.join();
        ::sigaction(SIGUSR1, &old_, nullptr);
    }
    std::uint64_t sent() const { return sent_.load(); }

private:
    struct sigaction old_ {};
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> sent_{0};
    std::thread thread_;
};

// 24 tensors of 64 rows, 40 KiB to 2 MiB each (~26 MiB): many chunks per read.
std::vector<tensor_spec> specs() {
    std::vector<tensor_spec> ts;
    for (int i = 0; i < 24; ++i) {
        const std::uint64_t row = 640 + 4096 * static_cast<std::uint64_t>(i % 8);
        ts.push_back({"layer" + std::to_string(i) + ".weight", "U8", {64, row}, 64 * row});
    }
    return ts;
}

// tensor_bytes(), computed once per tensor (the pattern is slow at -O0 under ASan).
const std::vector<std::byte>& expected(const std::string& name, std::uint64_t size) {
    static std::map<std::string, std::vector<std::byte>> cache;
    auto it = cache.find(name);
    if (it == cache.end()) it = cache.emplace(name, tensor_bytes(name, size)).first;
    return it->second;
}

// The file of specs(), built once.
const std::vector<std::byte>& checkpoint_file() {
    static const std::vector<std::byte> bytes = build_file(specs()).bytes;
    return bytes;
}

void check_all(reader& r) {
    auto sel = r.all();
    std::vector<std::byte> arena(r.packed_size(sel));
    auto placed = r.read_packed(sel, arena);
    for (std::size_t k = 0; k < sel.size(); ++k) {
        const auto& t = r.tensors()[sel.indices()[k]];
        const auto& want = expected(t.name, t.size());
        INFO(t.name);
        REQUIRE(std::equal(want.begin(), want.end(), arena.begin() + static_cast<std::ptrdiff_t>(placed[k].offset)));
    }
    const auto& t = r.tensors()[5];
    const std::uint64_t row = t.size() / 64;
    std::vector<std::byte> rows(10 * row);
    r.read_rows(t.name, 7, 17, rows);
    const auto& want = expected(t.name, t.size());
    REQUIRE(std::equal(rows.begin(), rows.end(), want.begin() + static_cast<std::ptrdiff_t>(7 * row)));
}

reader_options small_chunks(file_options::buffered_mode mode, bool direct) {
    reader_options o;
    o.source.file.chunk_size = 128u << 10;
    o.source.file.threads = 2;
    o.source.file.mode = mode;
    o.source.file.direct = direct;
    return o;
}

// Writes specs() with `opts`, every tensor through add() and every third also chunked.
void write_checkpoint(const fs::path& p, const writer_options& opts) {
    writer w(p.string(), opts);
    int i = 0;
    for (auto& s : specs()) {
        const auto& bytes = expected(s.name, s.bytes);
        if (i++ % 3) {
            w.add(s.name, dtype::U8, s.shape, bytes);
        } else {
            w.begin(s.name, dtype::U8, s.shape);
            for (std::size_t off = 0; off < bytes.size(); off += 50000)
                w.append(std::span(bytes).subspan(off, std::min<std::size_t>(50000, bytes.size() - off)));
            w.end();
        }
    }
    w.finish();
}

}  // namespace

TEST_CASE("signals: local reads in every mode complete and are exact under a signal storm") {
    temp_dir dir;
    const auto path = dir / "m.safetensors";
    write_file(path, checkpoint_file());
    signal_spray spray;
    const std::uint64_t before = handled.load();
    for (int rep = 0; rep < 2; ++rep) {
        for (auto mode : {file_options::buffered_mode::hot, file_options::buffered_mode::cold}) {
            auto r = reader::open(path.string(), small_chunks(mode, false));
            check_all(r);
        }
        auto r = reader::open(path.string(), small_chunks(file_options::buffered_mode::automatic, true));
        check_all(r);
    }
    INFO("signals sent " << spray.sent());
    CHECK(handled.load() - before > 100);  // the storm really happened
}

TEST_CASE("signals: the writer (O_DIRECT and buffered) publishes exact files under a signal storm") {
    temp_dir dir;
    signal_spray spray;
    const std::uint64_t before = handled.load();
    for (bool direct : {true, false}) {
        writer_options o;
        o.direct = direct;
        o.block_size = 256u << 10;
        o.queue_depth = 8;
        const auto path = dir / (direct ? "direct.safetensors" : "buffered.safetensors");
        write_checkpoint(path, o);
        auto r = reader::open(path.string());
        check_all(r);
    }
    CHECK(handled.load() - before > 100);
}

TEST_CASE("signals: HTTP range reads against nginx complete and are exact under a signal storm") {
    if (run_command("command -v nginx >/dev/null 2>&1").status != 0) {
        SKIP("nginx not installed");
    }
    temp_dir dir;
    fs::create_directories(dir / "www");
    write_file(dir / "www" / "m.safetensors", checkpoint_file());
    nginx_server web(dir / "nginx", nginx_config{dir / "www", "", "", nullptr, 2, 0});
    reader_options o;
    o.source.http.connections_per_origin = 4;
    o.plan.chunk_size = 256u << 10;
    signal_spray spray;
    const std::uint64_t before = handled.load();
    for (int rep = 0; rep < 2; ++rep) {
        auto r = reader::open(web.base_url() + "/m.safetensors", o);
        check_all(r);
    }
    CHECK(handled.load() - before > 100);
}

TEST_CASE("signals: async open, read and write on an io_context complete under a signal storm") {
    temp_dir dir;
    const auto path = dir / "m.safetensors";
    write_file(path, checkpoint_file());
    ba::io_context io;
    signal_spray spray;
    const std::uint64_t before = handled.load();
    bool done = false;
    ba::co_spawn(
        io,
        [&]() -> ba::awaitable<void> {
            for (int rep = 0; rep < 2; ++rep) {
                auto ar = co_await async_open(io.get_executor(), path.string(), small_chunks(
                                                  file_options::buffered_mode::cold, rep == 1),
                                              ba::use_awaitable);
                auto& r = ar.get();
                auto sel = r.all();
                std::vector<std::vector<std::byte>> bufs;
                std::vector<std::span<std::byte>> dsts;
                for (auto i : sel.indices()) bufs.emplace_back(r.tensors()[i].size());
                for (auto& b : bufs) dsts.emplace_back(b);
                co_await async_read(ar, sel, dsts, ba::use_awaitable);
                for (std::size_t k = 0; k < sel.size(); ++k) {
                    const auto& t = r.tensors()[sel.indices()[k]];
                    REQUIRE(bufs[k] == expected(t.name, t.size()));
                }
            }
            writer_options wo;
            wo.block_size = 256u << 10;
            async_writer aw(io.get_executor(), writer((dir / "out.safetensors").string(), wo));
            for (auto& s : specs()) {
                const auto& bytes = expected(s.name, s.bytes);
                co_await async_write(aw, s.name, dtype::U8, s.shape, bytes, ba::use_awaitable);
            }
            co_await async_finish(aw, std::nullopt, ba::use_awaitable);
            done = true;
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    io.run();
    REQUIRE(done);
    auto r = reader::open((dir / "out.safetensors").string());
    check_all(r);
    CHECK(handled.load() - before > 100);
}
