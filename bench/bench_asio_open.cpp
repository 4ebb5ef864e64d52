// bench_asio_open: what does opening on the caller's io_context (async_open:
// io_uring openat/statx/read, shards concurrently) cost against running the
// blocking reader::open on ringsafe's thread pool (the former async_open, still
// used for custom opens), and against a plain reader::open on the calling
// thread? A single file and an 8-shard index, page cache hot; arms interleaved
// in every repetition (order alternating), median microseconds per open over
// `--opens` opens, one io_context kept across opens (as a service would).
// Every async arm includes the async_reader's ring setup.
//
//   bench_asio_open [--opens N] [--reps N] [--dir PATH]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <unistd.h>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "ringsafe/asio.hpp"
#include "ringsafe/writer.hpp"

using namespace ringsafe;
namespace fs = std::filesystem;

namespace {

// A checkpoint of `tensors` F32 tensors of 4 KiB each at `path`.
void write_checkpoint(const std::string& path, const std::string& prefix, int tensors) {
    writer w(path);
    std::vector<std::byte> bytes(4096, std::byte{1});
    for (int i = 0; i < tensors; ++i) w.add(prefix + std::to_string(i), dtype::F32, {1024}, bytes);
    w.finish();
}

struct arm {
    std::string name;
    std::function<void()> open_once;
    std::vector<double> us;  // per repetition: microseconds per open
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    unsigned opens = 300, reps = 7;
    std::string dir = "/tmp";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : "0"; };
        if (a == "--opens") opens = static_cast<unsigned>(std::stoul(next()));
        else if (a == "--reps") reps = static_cast<unsigned>(std::stoul(next()));
        else if (a == "--dir") dir = next();
        else {
            std::fprintf(stderr, "usage: bench_asio_open [--opens N] [--reps N] [--dir PATH]\n");
            return 2;
        }
    }
    if (opens == 0 || reps == 0) return 2;
    const fs::path root = fs::path(dir) / ("bench_asio_open." + std::to_string(::getpid()));
    fs::create_directories(root);
    write_checkpoint((root / "single.safetensors").string(), "t", 64);
    std::string map;
    for (int s = 0; s < 8; ++s) {
        const std::string n = std::to_string(s);
        const std::string shard = std::string("shard").append(n).append(".safetensors");
        write_checkpoint((root / shard).string(), std::string("s").append(n).append(".t"), 64);
        for (int i = 0; i < 64; ++i) {
            if (!map.empty()) map += ',';
            map.append("\"s").append(std::to_string(s)).append(".t").append(std::to_string(i));
            map.append("\":\"").append(shard).append("\"");
        }
    }
    std::ofstream((root / "model.safetensors.index.json").string()) << "{\"weight_map\":{" << map << "}}";

    boost::asio::io_context io;
    reader_options plain, pooled;
    pooled.open = [](const std::string& s) { return open_file(s); };  // a custom open: the blocking pool
    auto async_arm = [&](const std::string& spec, const reader_options& ro) {
        return [&io, spec, &ro] {
            bool ok = false;
            asio::async_open(io.get_executor(), spec, ro, [&](asio::error_code ec, asio::async_reader) { ok = !ec; });
            io.restart();
            io.run();
            if (!ok) std::abort();
        };
    };
    std::printf("%-8s %-34s %10s %10s\n", "case", "arm", "us/open", "vs pool");
    for (const std::string c : {"single", "index8"}) {
        const std::string spec = (root / (c == "single" ? "single.safetensors" : "model.safetensors.index.json")).string();
        std::vector<arm> arms{
            {"async_open (ring, caller's executor)", async_arm(spec, plain), {}},
            {"async_open on the blocking pool", async_arm(spec, pooled), {}},
            {"reader::open (blocking, no async)", [&] { (void)reader::open(spec); }, {}},
        };
        for (unsigned r = 0; r < reps; ++r)
            for (std::size_t k = 0; k < arms.size(); ++k) {
                arm& a = arms[r % 2 ? arms.size() - 1 - k : k];
                const auto t0 = std::chrono::steady_clock::now();
                for (unsigned i = 0; i < opens; ++i) a.open_once();
                a.us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                               opens);
            }
        const double pool = median(arms[1].us);
        for (auto& a : arms) {
            const double m = median(a.us);
            std::printf("%-8s %-34s %10.1f %9.2fx\n", c.c_str(), a.name.c_str(), m, m / pool);
            std::printf("{\"bench\":\"asio_open\",\"case\":\"%s\",\"arm\":\"%s\",\"us_per_open_median\":%.2f,"
                        "\"min\":%.2f,\"max\":%.2f,\"ratio_vs_pool\":%.3f,\"reps\":%u,\"opens\":%u}\n",
                        c.c_str(), a.name.c_str(), m, *std::min_element(a.us.begin(), a.us.end()),
                        *std::max_element(a.us.begin(), a.us.end()), m / pool, reps, opens);
        }
    }
    fs::remove_all(root);
}
