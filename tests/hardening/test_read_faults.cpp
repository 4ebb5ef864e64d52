// Faults while reading real files, beyond the single-fault cases of
// test_file_source / test_reader_files: EIO injected at random completions of
// concurrent multi-threaded reads, a file truncated in the middle of a read, a
// file replaced (rename over it) while open, a FIFO or a directory given as a
// checkpoint, and RLIMIT_NOFILE exhausted while opening a sharded checkpoint.
// Every outcome is the exact bytes or an error that says what failed; never a
// hang, never stray bytes.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <filesystem>
#include <thread>

#include "checkpoint_bytes.hpp"
#include "ringsafe/reader.hpp"
#include "uring/fault_injection.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

std::vector<tensor_spec> tensors_of(int n, std::uint64_t bytes, const std::string& prefix = "t") {
    std::vector<tensor_spec> ts;
    for (int i = 0; i < n; ++i) ts.push_back({prefix + std::to_string(i), "U8", {bytes + i}, bytes + i});
    return ts;
}

reader_options small_chunks(unsigned threads) {
    reader_options o;
    o.source.file.chunk_size = 64u << 10;
    o.source.file.queue_depth = 4;
    o.source.file.threads = threads;
    return o;
}

// Reads every tensor into its own buffer; returns true when every byte matches.
bool read_all_matches(reader& r, const read_control& ctl = {}) {
    auto sel = r.all();
    std::vector<std::vector<std::byte>> bufs;
    std::vector<std::span<std::byte>> dsts;
    for (auto i : sel.indices()) bufs.emplace_back(r.tensors()[i].size(), std::byte{0x5A});
    for (auto& b : bufs) dsts.emplace_back(b);
    r.read(sel, dsts, ctl);
    for (std::size_t k = 0; k < sel.size(); ++k) {
        const auto& t = r.tensors()[sel.indices()[k]];
        if (bufs[k] != tensor_bytes(t.name, t.size())) return false;
    }
    return true;
}

}  // namespace

TEST_CASE("EIO at random completions of concurrent reads: right bytes or an error naming the file; the reader recovers") {
    temp_dir dir;
    const auto path = dir / "eio.safetensors";
    write_file(path, build_file(tensors_of(24, 300'000)).bytes);
    auto r = reader::open(path.string(), small_chunks(2));
    std::atomic<unsigned> completions{0}, injected{0};
    unsigned failures = 0, successes = 0;
    {
        uring::scoped_completion_fault fault([&](const uring::completion_event&, int res) {
            // About one completion in 97 fails, at points that move from run to run.
            if (completions.fetch_add(1) % 97 == 96) {
                injected.fetch_add(1);
                return -EIO;
            }
            return res;
        });
        for (int round = 0; round < 12; ++round) {
            std::vector<std::thread> threads;
            std::atomic<unsigned> ok{0}, failed{0}, wrong{0};
            for (int t = 0; t < 3; ++t)
                threads.emplace_back([&] {
                    try {
                        (read_all_matches(r) ? ok : wrong).fetch_add(1);
                    } catch (const error& e) {
                        bool named = std::string(e.what()).find(path.string()) != std::string::npos;
                        (named && e.code() == std::error_code(EIO, std::system_category()) ? failed : wrong)
                            .fetch_add(1);
                    }
                });
            for (auto& t : threads) t.join();
            CHECK(wrong.load() == 0);
            failures += failed.load();
            successes += ok.load();
        }
    }
    INFO(injected.load() << " EIO injected over " << completions.load() << " completions");
    CHECK(injected.load() > 0);
    CHECK(failures > 0);
    CHECK(failures + successes == 12 * 3);  // every read ended with right bytes or a named EIO
    CHECK(read_all_matches(r));  // with the fault gone the same reader reads everything right
}

TEST_CASE("-ECANCELED the reader did not ask for (io-wq under a pending signal) is retried") {
    temp_dir dir;
    const auto path = dir / "cancelled.safetensors";
    write_file(path, build_file(tensors_of(12, 300'000)).bytes);
    for (unsigned threads : {1u, 2u}) {
        auto r = reader::open(path.string(), small_chunks(threads));
        std::atomic<unsigned> completions{0}, injected{0};
        uring::scoped_completion_fault fault([&](const uring::completion_event&, int res) {
            if (completions.fetch_add(1) % 2) return res;
            injected.fetch_add(1);
            return -ECANCELED;
        });
        CHECK(read_all_matches(r));
        CHECK(injected.load() > 10);
    }
}

TEST_CASE("a file truncated in the middle of a read gives Truncated naming it, not a hang") {
    temp_dir dir;
    const auto path = dir / "shrinks.safetensors";
    auto built = build_file(tensors_of(8, 1'000'000));
    write_file(path, built.bytes);
    for (unsigned threads : {1u, 2u}) {
        auto opts = small_chunks(threads);
        auto r = reader::open(path.string(), opts);
        std::atomic<bool> cut{false};
        read_control ctl;
        ctl.on_progress = [&](std::uint64_t done, std::uint64_t total) {
            if (done > total / 4 && !cut.exchange(true)) REQUIRE(::truncate(path.c_str(), built.data_start + 100) == 0);
        };
        try {
            read_all_matches(r, ctl);
            FAIL("a read of a file cut to 100 data bytes succeeded");
        } catch (const error& e) {
            CHECK(e.code() == errc::Truncated);
            CHECK(std::string(e.what()).find(path.string()) != std::string::npos);
        }
        CHECK(cut.load());
        write_file(path, built.bytes);
    }
}

TEST_CASE("a file replaced by rename while open keeps giving the bytes of the file that was opened") {
    temp_dir dir;
    const auto path = dir / "model.safetensors";
    write_file(path, build_file(tensors_of(6, 200'000)).bytes);
    auto r = reader::open(path.string(), small_chunks(2));
    // Same names and sizes, other bytes: a mix-up would show as a mismatch.
    auto other = build_file(tensors_of(6, 200'000));
    for (std::size_t i = other.data_start; i < other.bytes.size(); ++i) other.bytes[i] = ~other.bytes[i];
    std::atomic<bool> stop{false};
    std::thread replacer([&] {
        for (int k = 0; !stop.load(); ++k) {
            auto tmp = dir / ("new" + std::to_string(k % 2));
            write_file(tmp, other.bytes);
            fs::rename(tmp, path);
        }
    });
    bool all_right = true;
    for (int i = 0; i < 20; ++i) all_right = all_right && read_all_matches(r);
    stop = true;
    replacer.join();
    CHECK(all_right);
}

TEST_CASE("a FIFO or a directory given as a checkpoint is refused, not waited on") {
    temp_dir dir;
    const auto fifo = dir / "pipe.safetensors";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    fs::create_directory(dir / "dir.safetensors");
    for (const auto& p : {fifo, dir / "dir.safetensors"}) {
        INFO(p);
        // A FIFO with no writer would block open(2) forever; run in a child with a watchdog.
        pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::alarm(20);
            try {
                (void)reader::open(p.string());
            } catch (const error& e) {
                _exit(std::string(e.what()).find(p.string()) != std::string::npos ? 0 : 2);
            }
            _exit(3);  // opened: wrong
        }
        int st = 0;
        REQUIRE(::waitpid(pid, &st, 0) == pid);
        INFO("child status " << st << (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? " (hung: killed by the watchdog)" : ""));
        CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 0));
    }
}

TEST_CASE("RLIMIT_NOFILE exhausted while opening shards gives EMFILE naming a path, then recovers") {
    temp_dir dir;
    std::string map;
    for (int s = 0; s < 16; ++s) {
        auto name = "shard-" + std::to_string(s) + ".safetensors";
        auto ts = tensors_of(2, 1000, "s" + std::to_string(s) + "_");
        write_file(dir / name, build_file(ts).bytes);
        for (auto& t : ts) map += (map.empty() ? "" : ",") + ("\"" + t.name + "\":\"" + name + "\"");
    }
    write_file(dir / "model.safetensors.index.json", "{\"weight_map\":{" + map + "}}");
    const auto index = (dir / "model.safetensors.index.json").string();
    reader_options opts;
    opts.parallel_shards = 16;
    rlimit old{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
    int open_now = 0;
    for ([[maybe_unused]] auto& e : fs::directory_iterator("/proc/self/fd")) ++open_now;
    rlimit tight = old;
    tight.rlim_cur = static_cast<rlim_t>(open_now + 6);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
    std::string what;
    std::error_code code;
    try {
        (void)reader::open(index, opts);
    } catch (const error& e) {
        what = e.what();
        code = e.code();
    }
    ::setrlimit(RLIMIT_NOFILE, &old);
    INFO(what);
    CHECK(code == std::error_code(EMFILE, std::system_category()));
    CHECK(what.find(dir.path().string()) != std::string::npos);
    auto r = reader::open(index, opts);
    CHECK(r.shards().size() == 16);
    CHECK(read_all_matches(r));
}

TEST_CASE("failed opens leak no file descriptors") {
    temp_dir dir;
    fs::create_directory(dir / "dir.safetensors");
    REQUIRE(::mkfifo((dir / "pipe.safetensors").c_str(), 0600) == 0);
    write_file(dir / "short.safetensors", std::string("\x10\0\0\0\0\0\0\0{}", 10));
    auto count = [] {
        int n = 0;
        for ([[maybe_unused]] auto& e : fs::directory_iterator("/proc/self/fd")) ++n;
        return n;
    };
    const int before = count();
    for (int i = 0; i < 50; ++i)
        for (const char* name : {"dir.safetensors", "pipe.safetensors", "short.safetensors", "missing.safetensors"}) {
            status st;
            CHECK_FALSE(reader::open((dir / name).string(), {}, st));
        }
    CHECK(count() == before);
}
