// The process-wide pool of rings and worker threads (uring/ring_pool.hpp,
// uring/worker_threads.hpp): readers opened one after another, or from many
// threads at once, reuse the pool's rings and threads instead of making their
// own, with exact bytes; an idle ring lets go of its reader's file; pooled
// threads take none of the application's signals; a fork()
// child starts with an empty pool and reads correctly, the parent's pool goes
// on; a process exits 0, without hanging, with rings and threads pooled and
// readers running (std::exit from another thread). Fork and exit cases
// ([fork]) run apart from the others (test ring_pool_fork), which also run
// under TSan (ci_suites.sh).
#include <catch2/catch.hpp>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ringsafe/reader.hpp"
#include "test_support.hpp"
#include "uring/ring_pool.hpp"
#include "uring/worker_ring.hpp"
#include "uring/worker_threads.hpp"

using namespace ringsafe;
using ringsafe::test::temp_dir;
using ringsafe::test::wait_child;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t small_bytes = 64u << 10;  // read inline on ring 0
constexpr std::uint64_t big_bytes = 3u << 20;     // cold mode: two rings, one worker thread

// `count` one-tensor checkpoints ("t", U8) of pattern bytes: even ones small, odd ones big.
struct pool_files {
    temp_dir dir;
    std::vector<std::string> paths;
    std::vector<std::vector<std::byte>> data;
    explicit pool_files(unsigned count) {
        for (unsigned i = 0; i < count; ++i) {
            const std::uint64_t n = i % 2 ? big_bytes : small_bytes;
            std::vector<std::byte> d(n);
            test::fill_pattern(d, 100 + i);
            std::string header = "{\"t\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(n) +
                                 "],\"data_offsets\":[0," + std::to_string(n) + "]}}";
            while (header.size() % 8) header += ' ';
            std::vector<std::byte> file(8 + header.size() + n);
            const std::uint64_t h = header.size();
            for (int b = 0; b < 8; ++b) file[b] = std::byte(h >> (8 * b));
            std::memcpy(file.data() + 8, header.data(), header.size());
            std::memcpy(file.data() + 8 + header.size(), d.data(), n);
            paths.push_back((dir / ("f" + std::to_string(i) + ".safetensors")).string());
            test::write_file(paths.back(), file);
            data.push_back(std::move(d));
        }
    }
};

// Big files are read in cold mode with two rings (a worker thread), 1 MiB chunks.
reader_options options_for(std::uint64_t bytes) {
    reader_options o;
    if (bytes > small_bytes) {
        o.source.file.mode = file_options::buffered_mode::cold;
        o.source.file.threads = 2;
        o.source.file.chunk_size = 1u << 20;
        o.plan.chunk_size = 1u << 20;
    }
    return o;
}

// Opens file i, reads all of "t", closes; true when the bytes are exact.
bool open_read_check(const pool_files& f, std::size_t i) {
    const auto& want = f.data[i];
    std::vector<std::byte> buf(want.size(), std::byte{0x5A});
    try {
        reader r = reader::open(f.paths[i], options_for(want.size()));
        std::span<std::byte> d(buf);
        r.read(r.select({"t"}), {&d, 1});
    } catch (const std::exception& e) {
        UNSCOPED_INFO(e.what());
        return false;
    }
    return std::memcmp(buf.data(), want.data(), want.size()) == 0;
}

// The io_uring instances this process has open: their /proc/self/fdinfo texts.
std::vector<std::string> ring_fdinfos() {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (fs::read_symlink(e.path(), ec).string() != "anon_inode:[io_uring]") continue;
        std::ifstream in("/proc/self/fdinfo/" + e.path().filename().string());
        std::stringstream ss;
        ss << in.rdbuf();
        out.push_back(ss.str());
    }
    return out;
}

// The thread a SIGUSR2 handler ran on.
std::atomic<long> handled_on{0};
void note_thread(int) { handled_on.store(::syscall(SYS_gettid)); }

// Set in the [fork] cases' children, which exit with objects of threads that
// do not exist there (fork) or still run (std::exit from another thread):
// LeakSanitizer (ASan builds) asks this hook at exit, and would report them.
std::atomic<bool> exiting_with_other_threads_objects{false};

// Empty until a [fork] case puts a reader in it: made before main(), so it is
// destroyed at exit after the pool's exit handler has run (registered later).
std::optional<reader> reader_destroyed_after_the_pool;

}  // namespace

extern "C" int __lsan_is_turned_off() { return exiting_with_other_threads_objects.load() ? 1 : 0; }

TEST_CASE("readers opened one after another reuse the pool's rings and threads") {
    uring::set_ring_pool_enabled(true);
    pool_files f(20);
    REQUIRE(open_read_check(f, 0));  // warm: one ring of each kind, one worker thread
    REQUIRE(open_read_check(f, 1));
    const auto rings = uring::worker_rings_made();
    const auto threads = uring::worker_threads_started();
    bool all_exact = true;
    for (std::size_t k = 0; k < 500; ++k) all_exact = open_read_check(f, k % 20) && all_exact;
    CHECK(all_exact);
    CHECK(uring::worker_rings_made() == rings);
    CHECK(uring::worker_threads_started() == threads);
    // The io_uring descriptors stay bounded by the pool (not one per reader).
    // No reader is open: every io_uring left is an idle one of the pool.
    CHECK(uring::idle_rings() >= 2);
    CHECK(ring_fdinfos().size() == uring::idle_rings());
}

TEST_CASE("an idle ring in the pool lets go of the file its reader closed") {
    uring::set_ring_pool_enabled(true);
    pool_files f(2);
    const std::string name = fs::canonical(f.paths[0]).string();
    auto registered = [&] {
        std::size_t n = 0;
        for (const auto& info : ring_fdinfos()) n += info.find(name) != std::string::npos;
        return n;
    };
    {
        reader r = reader::open(f.paths[0]);
        std::vector<std::byte> buf(small_bytes);
        std::span<std::byte> d(buf);
        r.read(r.select({"t"}), {&d, 1});
        // Idle in the pool and still registered with this reader's file (the
        // kernel lists it in the ring's fdinfo), ready for its next read.
        CHECK(registered() == 1);
    }
    CHECK(registered() == 0);
    CHECK(open_read_check(f, 0));
}

TEST_CASE("many readers from many threads share the pool, bytes exact") {
    uring::set_ring_pool_enabled(true);
    pool_files f(24);
    const auto rings = uring::worker_rings_made();
    constexpr unsigned threads = 8, cycles = 200;
    std::atomic<unsigned> wrong{0};
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t)
        ts.emplace_back([&, t] {
            for (unsigned k = 0; k < cycles; ++k) {
                // Mostly small reads; every tenth a big one on two rings.
                const std::size_t i = (k % 10 == 9 ? 1 : 0) + 2 * ((t * 5 + k) % 12);
                if (!open_read_check(f, i)) wrong.fetch_add(1);
            }
        });
    for (auto& th : ts) th.join();
    CHECK(wrong.load() == 0);
    // At most every thread's rings at once were ever needed (8 small + 8
    // pairs), however many readers were opened (1600).
    CHECK(uring::worker_rings_made() - rings <= 2 * threads);
}

TEST_CASE("pooled threads leave the application's signals to the application's threads") {
    uring::set_ring_pool_enabled(true);
    pool_files f(2);
    REQUIRE(open_read_check(f, 1));  // a pooled worker thread now waits for work
    REQUIRE(uring::idle_threads() >= 1);
    struct sigaction sa {}, old {};
    sa.sa_handler = note_thread;
    sigemptyset(&sa.sa_mask);
    REQUIRE(::sigaction(SIGUSR2, &sa, &old) == 0);
    sigset_t usr2, prev;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    ::pthread_sigmask(SIG_BLOCK, &usr2, &prev);
    // Process-directed: any thread that does not block it may run the
    // handler. The pause gives such a thread time to; ours all block it.
    ::kill(::getpid(), SIGUSR2);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::pthread_sigmask(SIG_SETMASK, &prev, nullptr);  // still pending: runs here now
    ::sigaction(SIGUSR2, &old, nullptr);
    CHECK(handled_on.load() == ::syscall(SYS_gettid));
}

TEST_CASE("fork: a child of a process with a warm pool starts with an empty one", "[fork]") {
    uring::set_ring_pool_enabled(true);
    pool_files f(8);
    for (std::size_t i = 0; i < 8; ++i) REQUIRE(open_read_check(f, i));
    REQUIRE(uring::idle_rings() >= 2);
    // Another thread keeps taking and returning rings and threads while we fork.
    // Under ASan it pauses between reads for each fork: the sanitizer runtime CI
    // builds with (clang 14) has no fork handlers for its allocator, so a child
    // forked while another thread allocates can block forever in that allocator
    // (seen: SizeClassAllocator64::GetFromAllocator), not in ringsafe. Other
    // builds fork mid-read.
    std::atomic<bool> stop{false}, busy_ok{true};
    std::atomic<int> gate{0};  // 1: a fork wants the busy thread paused; 2: it is
    std::thread busy([&] {
        for (std::size_t k = 0; !stop.load(); ++k) {
            int want = 1;
            if (gate.compare_exchange_strong(want, 2)) gate.wait(2);
            if (!open_read_check(f, k % 8)) busy_ok = false;
        }
    });
    auto pause_busy = [&] {
        if (!test::asan_build) return;
        gate = 1;
        while (gate.load() != 2) std::this_thread::yield();
    };
    auto resume_busy = [&] {
        gate = 0;
        gate.notify_all();
    };
    struct joined {
        std::atomic<bool>& stop;
        std::atomic<int>& gate;
        std::thread& t;
        ~joined() {
            stop = true;
            gate = 0;
            gate.notify_all();
            if (t.joinable()) t.join();
        }
    } join_busy{stop, gate, busy};
    for (int round = 0; round < 5; ++round) {
        INFO("round " << round);
        pause_busy();
        const pid_t pid = ::fork();
        if (pid != 0) resume_busy();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::alarm(240);  // a backstop: the parent reports a hang at 120 s
            exiting_with_other_threads_objects = true;
            if (uring::idle_rings() != 0 || uring::idle_threads() != 0) std::_Exit(3);
            for (std::size_t k = 0; k < 40; ++k)
                if (!open_read_check(f, k % 8)) std::_Exit(1);
            if (uring::idle_rings() == 0) std::_Exit(4);  // the child's own pool works
            std::exit(0);  // the exit handler closes the child's pool
        }
        bool parent_ok = true;
        for (std::size_t k = 0; k < 40; ++k) parent_ok = open_read_check(f, k % 8) && parent_ok;
        const int status = wait_child(pid, 120);
        CHECK(parent_ok);
        REQUIRE(status != -1);  // -1: the child hung and was killed
        if (WIFSIGNALED(status)) FAIL("child killed by signal " << WTERMSIG(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    stop = true;
    busy.join();
    CHECK(busy_ok.load());
    CHECK(uring::idle_rings() >= 2);  // the parent's pool is intact
    CHECK(open_read_check(f, 1));
}

TEST_CASE("exit: a process exits 0 with rings and threads pooled, readers running, std::exit from another thread",
          "[fork]") {
    uring::set_ring_pool_enabled(true);
    pool_files f(8);
    for (int variant = 0; variant < 2; ++variant) {
        INFO("variant " << variant);
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::alarm(240);  // a backstop: the parent reports a hang at 120 s
            exiting_with_other_threads_objects = true;
            for (std::size_t i = 0; i < 8; ++i)
                if (!open_read_check(f, i)) std::_Exit(1);
            // Pooled now: idle rings, and the worker thread the big reads used.
            if (uring::idle_rings() == 0 || uring::idle_threads() == 0) std::_Exit(3);
            // A reader that outlives the pool's exit handler (see its declaration).
            reader_destroyed_after_the_pool.emplace(reader::open(f.paths[1], options_for(big_bytes)));
            if (variant == 0) std::exit(0);  // from main, readers idle
            std::atomic<bool> stop{false};
            std::vector<std::thread> readers;
            for (unsigned t = 0; t < 3; ++t)
                readers.emplace_back([&, t] {
                    for (std::size_t k = t; !stop.load(); ++k) (void)open_read_check(f, k % 8);
                });
            std::thread([] {
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
                std::exit(0);  // while the readers read, from neither main nor a reader
            }).detach();
            for (std::size_t k = 0;; ++k) (void)open_read_check(f, k % 8);
        }
        const int status = wait_child(pid, 120);
        REQUIRE(status != -1);  // -1: the child hung in exit and was killed
        if (WIFSIGNALED(status)) FAIL("child killed by signal " << WTERMSIG(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
}
