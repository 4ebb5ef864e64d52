// How fast do URL sources move a checkpoint over loopback HTTP?
//   (a) nginx, unthrottled: ringsafe vs curl (one stream; -Z parallel ranges)
//       and vs a minimal recv()-into-huge-pages client (the loopback ceiling);
//   (b) object-store model: the fault server with a per-connection rate cap
//       and a first-byte delay: ringsafe with N = 1, 2, 4, 8 connections vs
//       one curl stream;
//   (c) the reader over the URL: reader::execute (blocking) vs
//       ringsafe::asio::async_read on one io_context thread, same plan,
//       unthrottled (nginx) and capped (8 connections); the target compares
//       async_read with execute() on one event loop (http_options::threads = 1),
//       as async_read runs on the caller's one io_context;
//   (d) connection scaling: the fault server at 10 MB/s per connection with a
//       30 ms first byte, N = 1, 8, 32, 64 connections at the default request
//       size; each arm's object is N x 10 MB/s x 4 s (1.5 s with --quick), so
//       every arm runs about as long and N = 64 moves 2.56 GB (>= 2 GiB);
//   (e) event loops of a blocking read: ringsafe threads=1 vs threads=2 at 4
//       and 16 connections (nginx, unthrottled), each against the minimal
//       client at as many connections;
//   (f) the per-read cost of the read's extra threads (started and joined by
//       each read): reads of 1, 4 and 16 MiB (256 KiB requests, 4
//       connections) on one open source, threads=1 vs threads=2, and a bare
//       std::thread start+join; reads of 1 and 4 MiB at the default 32
//       connections (where they stay on the first loop);
//   and that listing a remote header under the prefetch size takes one request.
// Arms are interleaved, each repeated (median reported). JSON lines + a table.
// Usage: bench_http [--quick] [--reps N] [--size-mib M]   (BENCH_HTTP_ONLY=scale: group (d) alone;
//        BENCH_HTTP_ONLY=threads: groups (e) and (f))
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "http_harness.hpp"
#include "raw_range_client.hpp"
#include "ringsafe/asio.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/reader.hpp"
#include "test_support.hpp"

using namespace ringsafe;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

struct arm {
    std::string group, name;
    std::uint64_t bytes;
    std::function<void()> run;
    std::vector<double> gbps;
    double median() const {
        auto v = gbps;
        std::sort(v.begin(), v.end());
        return v.empty() ? 0 : v[v.size() / 2];
    }
};

// A prefaulted buffer on transparent huge pages (what a loader would hand us).
std::byte* huge_buffer(std::uint64_t size) {
    const std::uint64_t rounded = (size + (2u << 20) - 1) & ~std::uint64_t((2u << 20) - 1);
    void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    ::madvise(p, rounded, MADV_HUGEPAGE);
    std::memset(p, 0, rounded);
    return static_cast<std::byte*>(p);
}

// A safetensors file of `tensors` U8 tensors filling `size` bytes in total.
void write_checkpoint(const fs::path& path, std::uint64_t size, unsigned tensors) {
    std::string json = "{";
    std::uint64_t per = (size - 4096) / tensors, off = 0;
    for (unsigned i = 0; i < tensors; ++i) {
        json += i ? "," : "";  // appended piecewise: '+' chains trip g++ 12's -Wrestrict (GCC bug 105329)
        json += "\"layer." + std::to_string(i) + ".weight\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(per) +
                "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + per) + "]}";
        off += per;
    }
    json += "}";
    json.append((8 - json.size() % 8) % 8, ' ');
    std::vector<std::byte> data(off);
    test::fill_pattern(data, 1);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    std::uint64_t n = json.size();
    unsigned char len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    std::fwrite(len, 1, 8, f);
    std::fwrite(json.data(), 1, json.size(), f);
    std::fwrite(data.data(), 1, data.size(), f);
    std::fclose(f);
}

void run_curl(const std::string& args) {
    if (test::run_command("curl -s --fail " + args + " 2>/dev/null").status != 0) throw std::runtime_error("curl failed: " + args);
}

std::string curl_parallel_ranges(const std::string& url, std::uint64_t size, unsigned n) {
    std::string a = "-Z --parallel-max " + std::to_string(n);
    for (unsigned i = 0; i < n; ++i) {
        std::uint64_t first = size * i / n, last = size * (i + 1) / n - 1;
        a += " -r " + std::to_string(first) + "-" + std::to_string(last) + " -o /dev/null '" + url + "'";
    }
    return a;
}

// chunk 0: the engine's default request size; threads 0: the engine's default event loops.
void ringsafe_fetch(const std::string& url, std::uint64_t size, std::byte* dst, unsigned conns, std::uint64_t chunk,
                    unsigned threads = 0) {
    http_options o;
    o.connections_per_origin = conns;
    o.chunk_size = chunk;
    o.threads = threads;
    auto src = open_url(url, o);
    if (src->size() != size) throw std::runtime_error("size mismatch for " + url);
    read_op op{0, size, dst, 0};
    src->execute({&op, 1}, {});
}

// Every tensor of `url` packed into `dst` through the reader: blocking
// execute(), or async_read on an io_context run by this thread alone. Both
// include the open (one request), as a loader would pay it.
void reader_fetch(const std::string& url, std::byte* dst, std::uint64_t capacity, unsigned conns, bool async,
                  unsigned threads = 0) {
    reader_options ro;
    ro.source.http.connections_per_origin = conns;
    ro.source.http.threads = threads;
    ro.source.http.chunk_size = 8u << 20;
    reader r = reader::open(url, ro);
    const auto sel = r.all();
    if (r.packed_size(sel) > capacity) throw std::runtime_error("bench_http: buffer too small for " + url);
    const auto plan = r.plan_packed(sel, {dst, capacity});
    if (!async) {
        r.execute(plan);
        return;
    }
    boost::asio::io_context io;
    asio::async_reader ar(io.get_executor(), std::move(r));
    asio::error_code result = make_error_code(errc::IoError);
    asio::async_read(ar, plan, [&](asio::error_code ec, std::size_t) { result = ec; });
    io.run();
    if (result) throw error(static_cast<std::error_code>(result), "bench_http: async_read of " + url);
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    unsigned reps = 5;
    std::uint64_t mib = 1024;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--quick") quick = true, mib = 256;
        else if (a == "--reps" && i + 1 < argc) reps = static_cast<unsigned>(std::atoi(argv[++i]));
        else if (a == "--size-mib" && i + 1 < argc) mib = std::strtoull(argv[++i], nullptr, 10);
        else {
            std::fprintf(stderr, "usage: bench_http [--quick] [--reps N] [--size-mib M]\n");
            return 2;
        }
    }
    test::require_program("curl");
    test::temp_dir tmp;
    const fs::path root = tmp / "www";
    fs::create_directories(root);
    write_checkpoint(root / "model.safetensors", mib << 20, 16);
    const std::uint64_t size = fs::file_size(root / "model.safetensors");
    test::nginx_server ng(tmp / "nginx", {root, "", "", nullptr, 2, 0});
    setenv("RINGSAFE_FAULT_SERVER", RINGSAFE_FAULT_SERVER_PATH, 0);
    test::fault_server slow(tmp / "fault");
    const std::string url = ng.base_url() + "/model.safetensors";
    const std::string cmd_hot = "cat '" + (root / "model.safetensors").string() + "' > /dev/null";
    test::run_command(cmd_hot);  // page cache hot
    // (d) connection scaling: N x 10 MB/s x 4 s per arm (the N = 64 object is 2.56 GB).
    const std::uint64_t scale_cap = 10'000'000, scale_ms = quick ? 1500 : 4000;
    const std::vector<unsigned> scale_n{1u, 8u, 32u, 64u};
    auto scale_bytes = [&](unsigned n) { return n * scale_cap * scale_ms / 1000; };
    std::byte* dst = huge_buffer(std::max(size, scale_bytes(scale_n.back())));

    // (b) object-store model: 50 MB/s per connection, 20 ms to first byte.
    const std::uint64_t cap = 50'000'000, slow_size = (quick ? 32ull : 128ull) << 20;
    const std::string slow_url = slow.base_url() + "/obj?rate=" + std::to_string(cap) + "&delay_ms=20&size=" + std::to_string(slow_size);

    std::vector<arm> arms;
    arms.push_back({"a", "curl 1 stream", size, [&] { run_curl("-o /dev/null '" + url + "'"); }, {}});
    arms.push_back({"a", "curl -Z 4 ranges", size, [&] { run_curl(curl_parallel_ranges(url, size, 4)); }, {}});
    arms.push_back({"a", "minimal client 4 conns", size, [&] {
                        bench::raw_range_fetch(ng.port(), "/model.safetensors", size, dst, 4, 8u << 20); }, {}});
    arms.push_back({"a", "ringsafe 4 conns", size, [&] { ringsafe_fetch(url, size, dst, 4, 8u << 20); }, {}});
    arms.push_back({"b", "curl 1 stream (capped)", slow_size, [&] { run_curl("-o /dev/null '" + slow_url + "'"); }, {}});
    for (unsigned n : {1u, 2u, 4u, 8u})
        arms.push_back({"b", "ringsafe N=" + std::to_string(n) + " (capped)", slow_size,
                        [&, n] { ringsafe_fetch(slow_url, slow_size, dst, n, 8u << 20); }, {}});
    // (c) The capped object is not a safetensors file: serve a checkpoint of
    // slow_size through the fault server's rate cap instead.
    write_checkpoint(root / "small.safetensors", slow_size, 16);
    const std::uint64_t small_size = fs::file_size(root / "small.safetensors");
    const std::string capped_ck = slow.base_url() + "/small.safetensors?file=" + (root / "small.safetensors").string() +
                                  "&rate=" + std::to_string(cap) + "&delay_ms=20";
    for (bool async : {false, true}) {
        const std::string how = async ? "reader async_read" : "reader execute";
        arms.push_back({"c", how + " 4 conns", size, [&, async] { reader_fetch(url, dst, size, 4, async); }, {}});
        arms.push_back({"c", how + " N=8 (capped)", small_size,
                        [&, async] { reader_fetch(capped_ck, dst, size, 8, async); }, {}});
    }
    // async_read runs one event loop (the caller's io_context); execute() runs one per
    // core by default: the front end's own cost is measured against execute() on one loop.
    arms.push_back({"c", "reader execute 4 conns 1 loop", size, [&] { reader_fetch(url, dst, size, 4, false, 1); }, {}});

    for (unsigned n : scale_n) {
        const std::string u = slow.base_url() + "/scale?rate=" + std::to_string(scale_cap) + "&delay_ms=30&size=" +
                              std::to_string(scale_bytes(n));
        arms.push_back({"d", "scale N=" + std::to_string(n) + " (10 MB/s, 30 ms)", scale_bytes(n),
                        [&, n, u] { ringsafe_fetch(u, scale_bytes(n), dst, n, 0); }, {}});
    }

    // (e) event loops: threads=1 vs threads=2, and the minimal client, at 4 and 16 connections.
    for (unsigned n : {4u, 16u}) {
        const std::string c = " " + std::to_string(n) + " conns";
        arms.push_back({"e", "threads: minimal client" + c, size, [&, n] {
                            bench::raw_range_fetch(ng.port(), "/model.safetensors", size, dst, n, 8u << 20); }, {}});
        for (unsigned t : {1u, 2u})
            arms.push_back({"e", "threads: ringsafe t=" + std::to_string(t) + c, size,
                            [&, n, t] { ringsafe_fetch(url, size, dst, n, 8u << 20, t); }, {}});
    }
    // (f) per-read thread start: reads of 1, 4 and 16 MiB (256 KiB requests, 4 connections)
    // on a source opened once, 64 MiB per arm.
    // The same at the default connections and request size (32 connections: a read of up
    // to 16 requests stays on the first loop, whose share holds them).
    std::map<unsigned, std::unique_ptr<source>> small_src;
    for (unsigned conns : {4u, 32u})
        for (unsigned t : {1u, 2u}) {
            http_options o;
            o.connections_per_origin = conns;
            o.chunk_size = conns == 4 ? 256u << 10 : 0;
            o.threads = t;
            small_src[conns * 10 + t] = open_url(url, o);
        }
    for (unsigned conns : {4u, 32u})
        for (std::uint64_t mib_each : {1u, 4u, 16u})
            for (unsigned t : {1u, 2u}) {
                if (conns == 32 && mib_each == 16) continue;
                const std::string c = conns == 4 ? "" : ", 32 conns";
                arms.push_back({"f", "threads: " + std::to_string(mib_each) + " MiB reads" + c + " t=" + std::to_string(t),
                                64ull << 20, [&, t, mib_each, conns] {
                                    for (std::uint64_t i = 0; i < 64 / mib_each; ++i) {
                                        read_op op{(i * 7 % 64) << 20, mib_each << 20, dst, 0};
                                        small_src[conns * 10 + t]->execute({&op, 1}, {});
                                    }
                                }, {}});
            }

    const char* only = std::getenv("BENCH_HTTP_ONLY");  // run only arms whose name contains it (debugging)
    for (unsigned r = 0; r < reps; ++r)
        for (auto& a : arms) {
            if (only && a.name.find(only) == std::string::npos) continue;
            if (a.group == "a" || a.group == "c" || a.group == "e" || a.group == "f") test::run_command(cmd_hot);
            auto t0 = clock_type::now();
            a.run();
            double s = std::chrono::duration<double>(clock_type::now() - t0).count();
            a.gbps.push_back(double(a.bytes) / s / 1e9);
            std::printf("{\"bench\":\"http\",\"rep\":%u,\"arm\":\"%s\",\"bytes\":%llu,\"seconds\":%.4f,\"GBps\":%.3f}\n", r,
                        a.name.c_str(), static_cast<unsigned long long>(a.bytes), s, a.gbps.back());
            std::fflush(stdout);
        }
    // The bytes ringsafe delivered are the file's.
    ringsafe_fetch(url, size, dst, 4, 8u << 20);
    auto file = test::read_file(root / "model.safetensors");
    bool data_ok = std::memcmp(file.data(), dst, size) == 0;
    // async_read places the same bytes as execute() (gaps between packed tensors stay zero).
    std::memset(dst, 0, size);
    reader_fetch(url, dst, size, 4, false);
    std::vector<std::byte> by_execute(dst, dst + size);
    std::memset(dst, 0, size);
    reader_fetch(url, dst, size, 4, true);
    const bool async_ok = std::memcmp(by_execute.data(), dst, size) == 0;

    // Listing the header of a remote checkpoint: exactly one request.
    const auto before = ng.access_log().size();
    auto rd = reader::open(url);
    const auto requests = ng.access_log(before + 1).size() - before;

    std::map<std::string, double> med;
    std::printf("\n%-28s %10s %8s %8s   (GB/s = 1e9 B/s, %u reps, %llu MiB / %llu MiB capped)\n", "arm", "median", "min",
                "max", reps, static_cast<unsigned long long>(mib), static_cast<unsigned long long>(slow_size >> 20));
    for (auto& a : arms) {
        if (a.gbps.empty()) continue;  // filtered out by BENCH_HTTP_ONLY
        med[a.name] = a.median();
        std::printf("%-28s %10.3f %8.3f %8.3f\n", a.name.c_str(), a.median(), *std::min_element(a.gbps.begin(), a.gbps.end()),
                    *std::max_element(a.gbps.begin(), a.gbps.end()));
    }
    struct ratio { std::string what; double value, target; };
    const double rs = med["ringsafe 4 conns"];
    std::vector<ratio> ratios{{"ringsafe / curl 1 stream", rs / med["curl 1 stream"], 1.3},
                              {"ringsafe / curl -Z 4 ranges", rs / med["curl -Z 4 ranges"], 2.0},
                              {"ringsafe / minimal client", rs / med["minimal client 4 conns"], 0.8}};
    for (unsigned n : {1u, 2u, 4u, 8u})
        ratios.push_back({"N=" + std::to_string(n) + " / (N x 50 MB/s cap)",
                          med["ringsafe N=" + std::to_string(n) + " (capped)"] * 1e9 / (n * double(cap)), 0.8});
    for (unsigned n : scale_n)
        ratios.push_back({"scale N=" + std::to_string(n) + " / (N x 10 MB/s)",
                          med["scale N=" + std::to_string(n) + " (10 MB/s, 30 ms)"] * 1e9 / (n * double(scale_cap)), 0.85});
    ratios.push_back({"N=8 / curl 1 stream (capped)", med["ringsafe N=8 (capped)"] / med["curl 1 stream (capped)"], 0.8 * 8});
    ratios.push_back({"async_read / execute on 1 loop (nginx)",
                      med["reader async_read 4 conns"] / med["reader execute 4 conns 1 loop"], 0.95});
    ratios.push_back({"async_read / execute, default loops (nginx)",
                      med["reader async_read 4 conns"] / med["reader execute 4 conns"], 0.0});
    ratios.push_back({"async_read / execute (capped)", med["reader async_read N=8 (capped)"] / med["reader execute N=8 (capped)"],
                      0.95});
    for (unsigned n : {4u, 16u}) {
        const std::string c = " " + std::to_string(n) + " conns";
        const double t1 = med["threads: ringsafe t=1" + c], t2 = med["threads: ringsafe t=2" + c];
        const double raw = med["threads: minimal client" + c];
        ratios.push_back({"threads=2 / threads=1," + c, t2 / t1, 1.0});
        ratios.push_back({"threads=1 / minimal client," + c, t1 / raw, 0.8});
        ratios.push_back({"threads=2 / minimal client," + c, t2 / raw, 0.8});
    }
    for (const char* each : {"1", "4", "16"})
        ratios.push_back({std::string("threads=2 / threads=1, ") + each + " MiB reads",
                          med[std::string("threads: ") + each + " MiB reads t=2"] /
                              med[std::string("threads: ") + each + " MiB reads t=1"], 1.0});
    for (const char* each : {"1", "4"})
        ratios.push_back({std::string("threads=2 / threads=1, ") + each + " MiB reads, 32 conns",
                          med[std::string("threads: ") + each + " MiB reads, 32 conns t=2"] /
                              med[std::string("threads: ") + each + " MiB reads, 32 conns t=1"], 0.9});
    std::printf("\n%-34s %8s %8s\n", "ratio", "value", "target");
    for (auto& r : ratios) {
        if (!std::isfinite(r.value) || r.value == 0) continue;  // an arm did not run
        if (r.target <= 0) {  // shown for context, no target
            std::printf("%-34s %8.2f %8s\n", r.what.c_str(), r.value, "-");
            std::printf("{\"bench\":\"http\",\"ratio\":\"%s\",\"value\":%.3f}\n", r.what.c_str(), r.value);
            continue;
        }
        std::printf("%-34s %8.2f %8.2f  %s\n", r.what.c_str(), r.value, r.target, r.value >= r.target ? "PASS" : "MISS");
        std::printf("{\"bench\":\"http\",\"ratio\":\"%s\",\"value\":%.3f,\"target\":%.2f,\"pass\":%s}\n", r.what.c_str(), r.value,
                    r.target, r.value >= r.target ? "true" : "false");
    }
    {
        // What each threads>1 read pays for its extra thread: a bare start + join (median of 1000).
        std::vector<double> us;
        for (int i = 0; i < 1000; ++i) {
            auto t0 = clock_type::now();
            std::thread([] {}).join();
            us.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
        }
        std::sort(us.begin(), us.end());
        std::printf("std::thread start + join: median %.1f us, p90 %.1f us\n", us[us.size() / 2], us[us.size() * 9 / 10]);
        std::printf("{\"bench\":\"http\",\"thread_start_join_us\":%.2f}\n", us[us.size() / 2]);
    }
    std::printf("header listing of %zu tensors took %zu request(s): %s\n", rd.tensors().size(), requests,
                requests == 1 ? "PASS" : "MISS");
    std::printf("ringsafe's bytes equal the file's: %s\n", data_ok ? "yes" : "NO");
    std::printf("async_read's bytes equal execute()'s: %s\n", async_ok ? "yes" : "NO");
    return data_ok && async_ok && requests == 1 ? 0 : 1;
}
