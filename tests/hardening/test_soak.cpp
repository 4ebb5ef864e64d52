// Soak: many threads reading many files (and, when nginx is installed, the
// same files over HTTP) for RINGSAFE_SOAK_SECONDS (default 300), mixing fresh
// readers, shared readers executed concurrently, packed reads and row slices.
// Every byte is checked against the pattern it was written with; resident
// memory and open file descriptors are sampled once a second and must stay
// flat after a warm-up (generous bounds: this is about leaks, not jitter).
// Prints the load held as a JSON line for the README's Reliability figures.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "checkpoint_bytes.hpp"
#include "http_harness.hpp"
#include "ringsafe/reader.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

std::uint64_t rss_bytes() {
    std::ifstream f("/proc/self/statm");
    std::uint64_t size = 0, resident = 0;
    f >> size >> resident;
    return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

struct load_counters {
    std::atomic<std::uint64_t> ops{0}, bytes{0}, mismatches{0}, errors{0};
};

// One operation on `r`: a random subset of tensors, packed or into separate buffers, or a row slice.
void one_operation(reader& r, std::mt19937_64& rng, load_counters& c) {
    const auto n = r.tensors().size();
    const int kind = static_cast<int>(rng() % 3);
    if (kind == 2) {  // rows of one tensor
        const auto& t = r.tensors()[rng() % n];
        std::uint64_t rows = t.shape.at(0), b = rng() % rows, e = b + 1 + rng() % (rows - b);
        const std::uint64_t row_bytes = t.size() / rows;
        std::vector<std::byte> dst((e - b) * row_bytes);
        r.read_rows(t.name, b, e, dst);
        auto want = tensor_bytes(t.name, t.size());
        if (!std::equal(dst.begin(), dst.end(), want.begin() + static_cast<std::ptrdiff_t>(b * row_bytes))) ++c.mismatches;
        c.bytes += dst.size();
    } else {
        auto sel = r.select_if([&](const tensor_info&) { return rng() % 2 == 0; });
        if (sel.size() == 0) sel = r.all();
        std::vector<std::byte> arena(r.packed_size(sel));
        auto placed = r.read_packed(sel, arena);
        for (std::size_t k = 0; k < sel.size(); ++k) {
            const auto& t = r.tensors()[sel.indices()[k]];
            auto want = tensor_bytes(t.name, t.size());
            if (!std::equal(want.begin(), want.end(), arena.begin() + static_cast<std::ptrdiff_t>(placed[k].offset)))
                ++c.mismatches;
            c.bytes += t.size();
        }
    }
    ++c.ops;
}

}  // namespace

TEST_CASE("soak: concurrent reads of many files and URLs stay correct with flat memory and fds") {
    const char* env = std::getenv("RINGSAFE_SOAK_SECONDS");
    const double seconds = env ? std::atof(env) : 300.0;
    temp_dir dir;
    fs::create_directories(dir / "www");
    std::vector<std::string> specs;
    for (int f = 0; f < 12; ++f) {
        std::vector<tensor_spec> ts;
        for (int i = 0; i < 10; ++i) {
            std::uint64_t rows = 64 + 37 * i + f, bytes = rows * 1024;
            ts.push_back({"f" + std::to_string(f) + ".w" + std::to_string(i), "U8", {rows, 1024}, bytes});
        }
        auto name = "m" + std::to_string(f) + ".safetensors";
        write_file(dir / "www" / name, build_file(ts).bytes);
        specs.push_back((dir / "www" / name).string());
    }
    std::unique_ptr<nginx_server> web;
    if (run_command("command -v nginx >/dev/null 2>&1").status == 0) {
        web = std::make_unique<nginx_server>(dir / "nginx", nginx_config{dir / "www", "", "", nullptr, 2, 0});
        for (int f = 0; f < 12; f += 2) specs.push_back(web->base_url() + "/m" + std::to_string(f) + ".safetensors");
    }
    reader_options opts;
    opts.source.file.threads = 1;
    opts.source.file.chunk_size = 256u << 10;
    opts.source.http.connections_per_origin = 2;
    std::vector<reader> shared;
    for (auto& s : specs) shared.push_back(reader::open(s, opts));

    load_counters c;
    std::atomic<bool> stop{false};
    const auto start = clock_type::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    std::vector<std::thread> workers;
    for (unsigned w = 0; w < 6; ++w)
        workers.emplace_back([&, w] {
            std::mt19937_64 rng(w * 7919 + 1);
            while (!stop.load()) {
                try {
                    if (rng() % 4 == 0) {  // a fresh reader: opens, rings, connections come and go
                        auto r = reader::open(specs[rng() % specs.size()], opts);
                        one_operation(r, rng, c);
                    } else {  // a shared reader, executed from several threads at once
                        one_operation(shared[rng() % shared.size()], rng, c);
                    }
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "soak: %s\n", e.what());
                    ++c.errors;
                }
            }
        });
    // Samples once a second; the first quarter (at least 2 s) is warm-up.
    std::uint64_t warm_rss = 0, max_rss = 0;
    std::size_t warm_fds = 0, max_fds = 0;
    const double warmup = std::max(2.0, seconds / 4);
    while (clock_type::now() < end) {
        std::this_thread::sleep_for(std::chrono::seconds(1));
        const double t = std::chrono::duration<double>(clock_type::now() - start).count();
        const auto rss = rss_bytes();
        const auto fds = open_fds();
        if (t <= warmup) {
            warm_rss = std::max(warm_rss, rss);
            warm_fds = std::max(warm_fds, fds);
        } else {
            max_rss = std::max(max_rss, rss);
            max_fds = std::max(max_fds, fds);
        }
    }
    stop = true;
    for (auto& t : workers) t.join();
    const double took = std::chrono::duration<double>(clock_type::now() - start).count();
    const std::size_t fds_after_join = open_fds();  // the fresh readers are gone: what stays is leaked or pooled
    std::printf("{\"soak_seconds\":%.1f,\"threads\":6,\"sources\":%zu,\"operations\":%llu,\"bytes\":%llu,"
                "\"errors\":%llu,\"mismatches\":%llu,\"warm_rss\":%llu,\"max_rss_after\":%llu,"
                "\"warm_fds\":%zu,\"max_fds_after\":%zu,\"fds_after_join\":%zu}\n",
                took, specs.size(), static_cast<unsigned long long>(c.ops.load()),
                static_cast<unsigned long long>(c.bytes.load()), static_cast<unsigned long long>(c.errors.load()),
                static_cast<unsigned long long>(c.mismatches.load()), static_cast<unsigned long long>(warm_rss),
                static_cast<unsigned long long>(max_rss), warm_fds, max_fds, fds_after_join);
    CHECK(c.ops.load() > 0);
    CHECK(c.errors.load() == 0);
    CHECK(c.mismatches.load() == 0);
    // Flat: after warm-up, growth stays within 64 MiB + 50 % of the warm level.
    if (max_rss) CHECK(max_rss <= warm_rss + warm_rss / 2 + (64u << 20));
    // Descriptors: a sample catches up to six fresh readers mid-operation (each
    // a file or connection or two, a ring, cold-mode file descriptions), so the
    // running count swings by more than a short warm-up sees (62 -> 74 in a 20 s
    // CI run). What is left once the workers are gone holds only the shared
    // readers' pooled connections and rings (58 against a warm-up peak of 59
    // under ASan, 63-68 in release), which may still grow a little after
    // warm-up: a leak of one descriptor per operation would show by the hundreds.
    if (max_fds) CHECK(max_fds <= warm_fds + 6 * 4);
    CHECK(fds_after_join <= warm_fds + 8);
}
