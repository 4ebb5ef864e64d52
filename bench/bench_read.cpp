// bench_read: how fast does ringsafe's reader move a checkpoint into caller
// memory, against every other way of doing it, measured in the same run on
// the same file? Arms are interleaved (rotating order), each repeated, medians
// compared; every row says what pages back its destination.
//
//   bench_read [--quick] [--size BYTES[K|M|G]] [--reps N] [--file PATH]
//              [--threads N] [--qd N] [--chunk BYTES] [--async] [--mode auto|hot|cold]
//              [--cases hot,scattered,rows,cold,direct,small,memory] [--gate SECONDS] [--tune]
//
// The checkpoint is generated once at --file (default
// /tmp/ringsafe-bench-read.safetensors) and reused by later runs.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "bench_args.hpp"
#include "bench_checkpoint.hpp"
#include "bench_report.hpp"
#include "read_baselines.hpp"
#include "ringsafe/buffer.hpp"
#include "ringsafe/reader.hpp"

using namespace ringsafe;
using namespace ringsafe::bench;

namespace {

struct settings {
    std::uint64_t size = (2ull << 30) + (200u << 20);
    unsigned reps = 5;
    std::string file = "/tmp/ringsafe-bench-read.safetensors";
    file_options engine;  // the ringsafe arms' options (library defaults unless overridden)
    std::string cases = "hot,scattered,rows,cold,direct,small,memory";
    double gate_s = 1;  // before each arm, wait up to this long for a quiet machine
    bool tune = false;  // add ringsafe variants (mode, threads, IOSQE_ASYNC, chunk) to the hot and cold cases
    bool want(const std::string& c) const { return ("," + cases + ",").find("," + c + ",") != std::string::npos; }
};

// Fraction of CPU time busy over `window` seconds (from /proc/stat).
double cpu_busy(double window) {
    auto sample = [] {
        std::ifstream f("/proc/stat");
        std::string cpu;
        unsigned long long v[8] = {}, idle = 0, all = 0;
        f >> cpu;
        for (auto& x : v) f >> x, all += x;
        idle = v[3] + v[4];
        return std::pair{idle, all};
    };
    auto [i0, a0] = sample();
    std::this_thread::sleep_for(std::chrono::duration<double>(window));
    auto [i1, a1] = sample();
    return a1 > a0 ? 1.0 - static_cast<double>(i1 - i0) / static_cast<double>(a1 - a0) : 0;
}

// Waits (at most gate_s) until the machine is under 25 % busy for 0.2 s; shared machines are noisy.
void wait_quiet(const settings& s) {
    auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < s.gate_s)
        if (cpu_busy(0.2) < 0.25) return;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The ringsafe arm: open (header read), plan, execute, all timed, into the
// caller's arena at the ranges' places.
double ringsafe_read(const settings& s, const std::vector<bench_range>& rs, std::byte* arena, bool direct,
                     const file_options* engine = nullptr) {
    auto t0 = std::chrono::steady_clock::now();
    reader_options ro;
    ro.source.file = engine ? *engine : s.engine;
    ro.source.file.direct = direct;
    reader r = reader::open(s.file, ro);
    std::vector<read_request> reqs;
    reqs.reserve(rs.size());
    for (const auto& x : rs) {
        read_request q;
        q.tensor = x.tensor;
        if (x.row_end > x.row_begin) q.box = {{x.row_begin, x.row_end}};
        q.dst = {arena + x.at, x.length};
        reqs.push_back(std::move(q));
    }
    r.execute(r.plan(reqs));
    return seconds_since(t0);
}

std::vector<copy_range> copies(const std::vector<bench_range>& rs, std::byte* arena) {
    std::vector<copy_range> out;
    for (const auto& r : rs) out.push_back({r.offset, r.length, arena + r.at});
    return out;
}

std::uint64_t total(const std::vector<bench_range>& rs) {
    std::uint64_t n = 0;
    for (const auto& r : rs) n += r.length;
    return n;
}

// Sampled check of what an arm wrote: both ends of each range and every 4093rd byte.
bool verify(const std::vector<bench_range>& rs, const std::byte* arena) {
    for (const auto& r : rs)
        for (std::uint64_t k = 0; k < r.length; k += (k < 4096 || r.length - k < 4096) ? 1 : 4093)
            if (arena[r.at + k] != content_byte(r.offset + k)) {
                std::fprintf(stderr, "bench_read: WRONG BYTE in %s at +%llu\n", r.tensor.c_str(),
                             static_cast<unsigned long long>(k));
                return false;
            }
    return true;
}

struct arm_spec {
    std::string name;
    std::string dst;  // fixed label, or "" = measure the arena's pages
    std::function<double()> run;
};

// Hot cases start from one known page-cache state: the file evicted, then its data read once
// in order by one thread into `ram` (readahead caches it in large folios). Copies out of 4 KiB
// folios, which an earlier out-of-order reader can leave behind, run at half the speed for
// every arm. `ram` holds the data bytes afterwards (the memcpy ceiling's source).
void cache_in_order(const std::string& path, std::uint64_t data_start, host_buffer& ram) {
    drop_cache(path);
    pread_loop(path, {{data_start, ram.size(), ram.data()}}, 1);
}

// Runs the arms interleaved (rotating start) `reps` times; cold cases evict the file first.
std::vector<arm_result> run_case(const settings& s, const std::string& name, bool cold, double bytes,
                                 std::vector<arm_spec>& arms, const host_buffer& arena) {
    std::vector<arm_result> rows(arms.size());
    const std::string pages = arena.pages().label();
    for (std::size_t i = 0; i < arms.size(); ++i)
        rows[i] = {name, arms[i].name, arms[i].dst.empty() ? pages : arms[i].dst, bytes, {}, ""};
    for (unsigned rep = 0; rep < s.reps; ++rep)
        for (std::size_t k = 0; k < arms.size(); ++k) {
            wait_quiet(s);
            const std::size_t i = (k + rep) % arms.size();
            if (!arms[i].run) continue;
            if (cold) drop_cache(s.file);
            const double sec = arms[i].run();
            if (sec > 0) rows[i].gbps.push_back(bytes / sec / 1e9);
        }
    return rows;
}

double median_of(const std::vector<arm_result>& rows, const std::string& arm) {
    for (const auto& r : rows)
        if (r.arm == arm) return r.median();
    return 0;
}

// Child mode: peak RSS of one full ringsafe load beyond the (prefaulted) caller arena.
int probe_rss(settings& s, bool direct) {
    auto ck = make_checkpoint(s.file, s.size);
    auto rs = full_ranges(ck);
    host_buffer arena(place_congruent(rs));
    auto status_kb = [](const char* key) {
        std::ifstream f("/proc/self/status");
        std::string line;
        while (std::getline(f, line))
            if (line.rfind(key, 0) == 0) return std::stoull(line.substr(std::strlen(key)));
        return 0ull;
    };
    const auto before = status_kb("VmRSS:");
    ringsafe_read(s, rs, arena.data(), direct);
    std::printf("%llu\n", (status_kb("VmHWM:") - before) * 1024);
    return 0;
}

double probe_in_child(const std::string& self, const settings& s, bool direct) {
    std::string cmd = self + " --probe-rss " + (direct ? "1" : "0") + " --size " + std::to_string(s.size) +
                      " --file " + s.file;
    std::FILE* p = ::popen(cmd.c_str(), "r");
    double v = -1;
    if (p && std::fscanf(p, "%lf", &v) != 1) v = -1;
    if (p) ::pclose(p);
    return v;
}

}  // namespace

int main(int argc, char** argv) {
    settings s;
    int probe = -1;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
            return argv[++i];
        };
        if (a == "--quick") s.size = 512u << 20, s.reps = 3;
        else if (a == "--size") s.size = parse_size(next());
        else if (a == "--reps") s.reps = static_cast<unsigned>(std::stoul(next()));
        else if (a == "--file") s.file = next();
        else if (a == "--threads") s.engine.threads = static_cast<unsigned>(std::stoul(next()));
        else if (a == "--qd") s.engine.queue_depth = static_cast<unsigned>(std::stoul(next()));
        else if (a == "--chunk") s.engine.chunk_size = parse_size(next());
        else if (a == "--async") s.engine.async_punt = true;
        else if (a == "--mode") {
            const std::string m = next();
            s.engine.mode = m == "hot"    ? file_options::buffered_mode::hot
                            : m == "cold" ? file_options::buffered_mode::cold
                                          : file_options::buffered_mode::automatic;
        }
        else if (a == "--cases") s.cases = next();
        else if (a == "--tune") s.tune = true;
        else if (a == "--gate") s.gate_s = std::stod(next());
        else if (a == "--probe-rss") probe = std::stoi(next());
        else {
            std::fprintf(stderr, "usage: bench_read [--quick] [--size N[K|M|G]] [--reps N] [--file PATH] "
                                 "[--threads N] [--qd N] [--chunk N] [--async] [--mode auto|hot|cold] [--cases LIST] "
                                 "[--gate SECONDS] [--tune]\n");
            return 2;
        }
    }
    if (probe >= 0) return probe_rss(s, probe == 1);

    auto ck = make_checkpoint(s.file, s.size);
    auto full = full_ranges(ck), scat = scattered_ranges(ck, 10), rank0 = row_ranges(ck, 0, 2),
         rank1 = row_ranges(ck, 1, 2);
    const std::uint64_t full_size = place_congruent(full);
    place_congruent(scat), place_congruent(rank0), place_congruent(rank1);
    std::printf("# bench_read: %s, %.2f GB, %zu tensors (offsets not 4 KiB-aligned), %u reps, engine: "
                "threads %u qd %u chunk %llu async %d mode %s\n",
                s.file.c_str(), ck.file_size / 1e9, ck.tensors.size(), s.reps, s.engine.threads, s.engine.queue_depth,
                static_cast<unsigned long long>(s.engine.chunk_size), s.engine.async_punt ? 1 : 0,
                s.engine.mode == file_options::buffered_mode::hot    ? "hot"
                : s.engine.mode == file_options::buffered_mode::cold ? "cold"
                                                                     : "auto");

    host_buffer thp(full_size, {page_kind::huge, true});
    host_buffer ram(ck.file_size - ck.data_start, {page_kind::huge, true});  // RAM copy for the memcpy ceiling
    cache_in_order(s.file, ck.data_start, ram);
    std::vector<target> targets;
    std::printf("# destination pages: THP arena %s, ringsafe output verified per case (sampled)\n",
                thp.pages().label().c_str());

    auto standard_arms = [&](const std::vector<bench_range>& rs, host_buffer& dst, bool cold, bool direct) {
        std::byte* a = dst.data();
        auto cp = copies(rs, a);
        std::vector<arm_spec> arms;
        arms.push_back({direct ? "ringsafe reader (O_DIRECT)" : "ringsafe reader", "",
                        [&s, &rs, a, direct] { return ringsafe_read(s, rs, a, direct); }});
        arms.push_back({direct ? "liburing loop O_DIRECT fixedbufs" : "liburing loop 1M qd32", "",
                        [&s, cp, a, &dst, direct] { return uring_loop(s.file, cp, direct, a, dst.size()); }});
        if (!direct) {
            arms.push_back({"pread loop 1 thread", "", [&s, cp] { return pread_loop(s.file, cp, 1); }});
            arms.push_back({"pread loop 2 threads", "", [&s, cp] { return pread_loop(s.file, cp, 2); }});
            arms.push_back({"mmap+memcpy 1 thread", "", [&s, cp] { return mmap_memcpy(s.file, cp, 1); }});
            arms.push_back({"mmap+memcpy 2 threads", "", [&s, cp] { return mmap_memcpy(s.file, cp, 2); }});
        }
        if (!cold)
            arms.push_back({"memcpy RAM->dst 2 threads", "", [&ram, &ck, cp] {
                                return memcpy_ranges(ram.data(), ck.data_start, cp, 2);
                            }});
        return arms;
    };
    // --tune: ringsafe with other engine options, as extra arms of the same case.
    std::vector<std::pair<std::string, file_options>> variants;
    variants.reserve(64);
    auto add_variants = [&](std::vector<arm_spec>& arms, bool direct) {
        if (!s.tune) return;
        if (!direct)
            for (auto m : {file_options::buffered_mode::hot, file_options::buffered_mode::cold}) {
                file_options o = s.engine;
                o.mode = m;
                variants.emplace_back(m == file_options::buffered_mode::hot ? "  mode hot (shared cursor, io-wq)"
                                                                            : "  mode cold (sequential streams)",
                                      o);
                const auto* v = &variants.back();
                arms.push_back({v->first, "", [&s, &full, &thp, v] {
                                    return ringsafe_read(s, full, thp.data(), false, &v->second);
                                }});
            }
        for (unsigned th : {1u, 2u})
            for (bool async : {false, true})
                for (std::uint64_t chunk : {std::uint64_t{1} << 20, std::uint64_t{4} << 20, std::uint64_t{16} << 20}) {
                    if (direct && async) continue;
                    file_options o = s.engine;
                    o.threads = th, o.async_punt = async, o.chunk_size = chunk;
                    variants.emplace_back("  threads " + std::to_string(th) + (async ? " async" : "") + " chunk " +
                                              std::to_string(chunk >> 20) + "M",
                                          o);
                    const auto* v = &variants.back();
                    arms.push_back({v->first, "", [&s, &full, &thp, v, direct] {
                                        return ringsafe_read(s, full, thp.data(), direct, &v->second);
                                    }});
                }
    };
    auto run = [&](const std::string& name, const std::vector<bench_range>& rs, host_buffer& dst, bool cold,
                   bool direct, std::vector<arm_spec> arms, const fio_result* fio) {
        if (!cold) cache_in_order(s.file, ck.data_start, ram);
        std::memset(dst.data(), 0xEE, dst.size());
        ringsafe_read(s, rs, dst.data(), direct);
        const bool ok = verify(rs, dst.data());
        auto rows = run_case(s, name, cold, static_cast<double>(total(rs)), arms, dst);
        if (!ok) rows[0].note = "OUTPUT WRONG";
        if (fio) rows.push_back({name, "fio (" + std::string(fio->ran ? "same file" : "skipped") + ")",
                                 "fio-internal", rows[0].bytes, fio->ran ? std::vector<double>{fio->gbps} : std::vector<double>{},
                                 fio->what});
        print_case(rows, rows[0].arm);
        return rows;
    };

    // 1. Hot page cache, whole file, huge-page destination.
    double rs_hot = 0;
    std::vector<arm_result> hot_rows;
    if (s.want("hot")) {
        auto fio_hot = run_fio(s.file, ck.file_size, false, true, 2);
        auto arms = standard_arms(full, thp, false, false);
        add_variants(arms, false);
        auto hot = run("hot, full file, THP dst", full, thp, false, false, arms, &fio_hot);
        hot_rows = hot;
        rs_hot = median_of(hot, "ringsafe reader");
        targets.push_back({"hot THP: ringsafe / pread 2 threads", rs_hot / median_of(hot, "pread loop 2 threads"), 0.9});
        targets.push_back({"hot THP: ringsafe / memcpy 2 threads", rs_hot / median_of(hot, "memcpy RAM->dst 2 threads"), 0.75});
        targets.push_back({"hot THP: ringsafe / mmap+memcpy 1 thread", rs_hot / median_of(hot, "mmap+memcpy 1 thread"), 3.0});
    }
    // 2. Scattered 10 % of the tensors, and 3. row slices for 2 ranks (hot, THP).
    if (s.want("scattered")) {
        auto sc = run("hot, every 10th tensor, THP dst", scat, thp, false, false, standard_arms(scat, thp, false, false), nullptr);
        targets.push_back({"scattered 10%: per-byte GB/s / full load's", median_of(sc, "ringsafe reader") / rs_hot, 0.9,
                           false, rs_hot > 0});
        // Context: what every arm keeps of its full-load GB/s on the small selection.
        if (rs_hot > 0) {
            std::printf("\n## scattered 10%%: each arm's per-byte GB/s / its own full load's\n");
            for (const auto& r : sc) {
                const double f = median_of(hot_rows, r.arm);
                if (f <= 0 || r.gbps.empty()) continue;
                std::printf("| %-34s | %6.3f |\n", r.arm.c_str(), r.median() / f);
                std::printf("{\"scattered_over_full\":%.4f,\"arm\":\"%s\"}\n", r.median() / f, r.arm.c_str());
            }
        }
    }
    if (s.want("rows")) {
        run("hot, rows of rank 0 of 2, THP dst", rank0, thp, false, false, standard_arms(rank0, thp, false, false), nullptr);
        run("hot, rows of rank 1 of 2, THP dst", rank1, thp, false, false, standard_arms(rank1, thp, false, false), nullptr);
    }
    // 4. Guest-cold buffered, and 5. guest-cold O_DIRECT (THP).
    if (s.want("cold")) {
        auto fio_cold = run_fio(s.file, ck.file_size, false, false, 1);
        auto arms = standard_arms(full, thp, true, false);
        add_variants(arms, false);
        run("guest-cold buffered, full file, THP dst", full, thp, true, false, arms, &fio_cold);
    }
    if (s.want("direct")) {
        auto fio_direct = run_fio(s.file, ck.file_size, true, false, 1);
        auto arms = standard_arms(full, thp, true, true);
        add_variants(arms, true);
        auto dio = run("guest-cold O_DIRECT, full file, THP dst", full, thp, true, true, arms, &fio_direct);
        targets.push_back({"cold O_DIRECT: ringsafe / minimal liburing loop",
                           median_of(dio, "ringsafe reader (O_DIRECT)") / median_of(dio, "liburing loop O_DIRECT fixedbufs"), 0.85});
    }
    thp = host_buffer();

    // 6. Hot, whole file, ordinary 4 KiB destination pages.
    if (s.want("small")) {
        host_buffer small(full_size, {page_kind::small, true});
        pread_loop(s.file, {{ck.data_start, ram.size(), ram.data()}}, 2);  // hot again after the cold cases
        run("hot, full file, 4KiB dst", full, small, false, false, standard_arms(full, small, false, false), nullptr);
    }
    ram = host_buffer();

    // Memory beyond the caller's buffers (a child process per mode, peak RSS).
    const std::string self = argv[0];
    for (bool direct : {false, true}) {
        if (!s.want("memory")) break;
        const double extra = probe_in_child(self, s, direct);
        std::printf("{\"peak_rss_beyond_buffers_bytes\":%.0f,\"direct\":%s}\n", extra, direct ? "true" : "false");
        targets.push_back({std::string("extra memory beyond caller buffers, MiB (") + (direct ? "O_DIRECT" : "buffered") + ")",
                           extra / 1048576.0, 64, true, extra >= 0});
    }
    print_targets(targets);
    return 0;
}
