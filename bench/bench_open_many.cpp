// bench_open_many: what a reader costs from open until its bytes land when a
// process opens many files in turn (a loader walking the shards of a
// checkpoint) or from several threads at once, with the process-wide ring pool
// on and off (ringsafe::set_ring_pool_enabled; RINGSAFE_RING_POOL=0 does the same from the environment).
//   bench_open_many [--dir DIR] [--shards N] [--big N] [--reps R] [--threads T]
// DIR (default /tmp/ringsafe_open_many) gets N shard files (default 200), each
// a 4 KiB tensor "small" then an 8 MiB tensor "big"; files of the right size
// are reused. Every file is read once first (page cache hot).
// Arms, each run with the pool on and with it off, interleaved per repetition:
//   open+4K            reader::open, read "small", close, on every shard in turn
//   open+4K direct     the same with O_DIRECT (rings with registered bounce buffers)
//   open+8M auto|cold  the same with "big" on the first --big shards (default
//                      50): auto = hot, one ring; cold = two rings, a worker thread
//   T threads open+4K  T threads taking the shards in turn (wall time per shard)
//   open reader 4K     read "small" again on one reader opened beforehand
// Prints per arm the median µs per shard (open to last byte) and, for the
// 8 MiB arms, to the first chunk, with the ratio off / on.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "ringsafe/reader.hpp"
#include "ringsafe/file_source.hpp"

using namespace ringsafe;
using clk = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t small_bytes = 4096;
constexpr std::uint64_t big_bytes = 8u << 20;

// Writes shard i unless a file of the right size is there; returns its path.
std::string make_shard(const fs::path& dir, unsigned i) {
    char name[32];
    std::snprintf(name, sizeof name, "shard_%03u.safetensors", i);
    const fs::path p = dir / name;
    std::string h = "{\"small\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(small_bytes) +
                    "],\"data_offsets\":[0," + std::to_string(small_bytes) + "]},\"big\":{\"dtype\":\"U8\",\"shape\":[" +
                    std::to_string(big_bytes) + "],\"data_offsets\":[" + std::to_string(small_bytes) + "," +
                    std::to_string(small_bytes + big_bytes) + "]}}";
    while (h.size() % 8) h += ' ';
    const std::uint64_t size = 8 + h.size() + small_bytes + big_bytes;
    std::error_code ec;
    if (fs::file_size(p, ec) == size && !ec) return p.string();
    std::vector<char> data(small_bytes + big_bytes);
    for (std::size_t k = 0; k < data.size(); ++k) data[k] = static_cast<char>((k * 131 + i) >> 3);
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    const std::uint64_t n = h.size();
    for (int b = 0; b < 8; ++b) out.put(static_cast<char>(n >> (8 * b)));
    out.write(h.data(), static_cast<std::streamsize>(h.size()));
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) throw std::runtime_error("cannot write " + p.string());
    return p.string();
}

struct sample {
    double first_us = 0;  // open until the first bytes landed
    double done_us = 0;   // open until the read returned
};

// Opens `path`, reads `tensor` into `buf`, closes: the times since open.
sample open_and_read(const std::string& path, const char* tensor, const reader_options& o, std::vector<std::byte>& buf) {
    const auto t0 = clk::now();
    std::optional<clk::time_point> first;
    read_control ctl;
    ctl.on_progress = [&](std::uint64_t, std::uint64_t) {
        if (!first) first = clk::now();
    };
    {
        reader r = reader::open(path, o);
        const selection sel = r.select({tensor});
        std::span<std::byte> d(buf.data(), r.at(tensor).size());
        r.read(sel, {&d, 1}, ctl);
    }
    const auto t1 = clk::now();
    auto us = [&](clk::time_point t) { return std::chrono::duration<double, std::micro>(t - t0).count(); };
    return {us(first.value_or(t1)), us(t1)};
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct arm {
    std::string name;
    bool pool = true;
    std::function<void(std::vector<sample>&)> run;  // appends one sample per shard
    std::vector<sample> samples;
    bool failed = false;
    std::string error;
};

}  // namespace

int main(int argc, char** argv) {
    fs::path dir = "/tmp/ringsafe_open_many";
    unsigned shards = 200, big = 50, reps = 5, threads = 4;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--dir") dir = v;
        else if (a == "--shards") shards = static_cast<unsigned>(std::stoul(v));
        else if (a == "--big") big = static_cast<unsigned>(std::stoul(v));
        else if (a == "--reps") reps = static_cast<unsigned>(std::stoul(v));
        else if (a == "--threads") threads = static_cast<unsigned>(std::stoul(v));
        else {
            std::fprintf(stderr, "usage: bench_open_many [--dir DIR] [--shards N] [--big N] [--reps R] [--threads T]\n");
            return 2;
        }
    }
    big = std::min(big, shards);
    fs::create_directories(dir);
    std::vector<std::string> paths;
    for (unsigned i = 0; i < shards; ++i) paths.push_back(make_shard(dir, i));

    reader_options automatic, cold, direct;
    cold.source.file.mode = file_options::buffered_mode::cold;
    direct.source.file.direct = true;
    std::vector<std::byte> warm_buf(big_bytes);
    for (auto& p : paths) open_and_read(p, "big", automatic, warm_buf);

    std::vector<arm> arms;
    for (bool pool : {true, false}) {
        auto series = [&paths, big](const char* tensor, const reader_options& o, unsigned count) {
            return [&paths, tensor, o, n = std::min<std::size_t>(count, paths.size())](std::vector<sample>& out) {
                std::vector<std::byte> buf(big_bytes);
                for (std::size_t i = 0; i < n; ++i) out.push_back(open_and_read(paths[i], tensor, o, buf));
            };
        };
        auto add = [&](std::string name, std::function<void(std::vector<sample>&)> run) {
            arm a;
            a.name = std::move(name);
            a.pool = pool;
            a.run = std::move(run);
            arms.push_back(std::move(a));
        };
        add("open+4K", series("small", automatic, shards));
        add("open+4K direct", series("small", direct, shards));
        add("open+8M auto", series("big", automatic, big));
        add("open+8M cold", series("big", cold, big));
        add(std::to_string(threads) + " threads open+4K",
                        [&paths, threads, automatic](std::vector<sample>& out) {
                            std::atomic<std::size_t> next{0};
                            const auto t0 = clk::now();
                            std::vector<std::thread> ts;
                            for (unsigned t = 0; t < threads; ++t)
                                ts.emplace_back([&] {
                                    std::vector<std::byte> buf(small_bytes);
                                    for (std::size_t i; (i = next.fetch_add(1)) < paths.size();)
                                        open_and_read(paths[i], "small", automatic, buf);
                                });
                            for (auto& t : ts) t.join();
                            const double per =
                                std::chrono::duration<double, std::micro>(clk::now() - t0).count() / paths.size();
                            out.push_back({per, per});
                        });
        auto open_reader = std::make_shared<std::optional<reader>>();
        add("open reader 4K",
                        [open_reader, path = paths[0], pool, shards](std::vector<sample>& out) {
                            if (!*open_reader) {
                                set_ring_pool_enabled(pool);
                                open_reader->emplace(reader::open(path));
                            }
                            reader& r = **open_reader;
                            const selection sel = r.select({"small"});
                            std::vector<std::byte> buf(small_bytes);
                            std::span<std::byte> d(buf);
                            for (unsigned i = 0; i < shards; ++i) {
                                const auto t0 = clk::now();
                                r.read(sel, {&d, 1});
                                const double us = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
                                out.push_back({us, us});
                            }
                        });
    }
    for (unsigned rep = 0; rep <= reps; ++rep)  // rep 0 warms (rings, threads, caches) and is not counted
        for (auto& a : arms) {
            if (a.failed) continue;
            set_ring_pool_enabled(a.pool);
            std::vector<sample> s;
            try {
                a.run(s);
            } catch (const std::exception& e) {
                a.failed = true;
                a.error = e.what();
                continue;
            }
            if (rep > 0) a.samples.insert(a.samples.end(), s.begin(), s.end());
        }

    std::printf("%u shards of 4 KiB + 8 MiB in %s, %u reps, arms interleaved; median us per shard, open to last byte "
                "(to first chunk)\n",
                shards, dir.c_str(), reps);
    std::printf("%-22s %22s %22s %12s\n", "arm", "pool on", "pool off", "off / on");
    for (std::size_t i = 0; i < arms.size() / 2; ++i) {
        const arm& on = arms[i];
        const arm& off = arms[i + arms.size() / 2];
        auto cell = [](const arm& a, char* buf, std::size_t n) {
            if (a.failed) return std::snprintf(buf, n, "failed"), void();
            std::vector<double> done, first;
            for (auto& s : a.samples) done.push_back(s.done_us), first.push_back(s.first_us);
            std::snprintf(buf, n, "%.1f (%.1f)", median(done), median(first));
        };
        char c_on[64], c_off[64];
        cell(on, c_on, sizeof c_on);
        cell(off, c_off, sizeof c_off);
        double ratio = 0;
        if (!on.failed && !off.failed) {
            std::vector<double> a, b;
            for (auto& s : on.samples) a.push_back(s.done_us);
            for (auto& s : off.samples) b.push_back(s.done_us);
            ratio = median(b) / median(a);
        }
        std::printf("%-22s %22s %22s %12.2f\n", on.name.c_str(), c_on, c_off, ratio);
        for (const arm* a : {&on, &off})
            if (a->failed) std::printf("  %s (pool %s): %s\n", a->name.c_str(), a->pool ? "on" : "off", a->error.c_str());
    }
    return 0;
}
