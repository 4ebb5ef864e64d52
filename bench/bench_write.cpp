// bench_write: how fast does the streaming writer make a checkpoint durable,
// against fio and a plain write loop on the same disk, in the same run?
//
//   bench_write [--quick] [--size BYTES] [--reps N] [--dir DIR] [--cli PATH]
//
// A checkpoint of a few hundred tensors (mixed sizes, not 4 KiB multiples) is
// generated in huge-page memory, then every arm writes it to DIR (default:
// the current directory), durable at the end, repetitions interleaved:
//   writer copy       writer::add (bytes staged through 16 MiB aligned blocks, O_DIRECT)
//   writer zero-copy  writer::add with a hold: O_DIRECT straight from the caller's memory
//   fio buffered      fio sequential write, bs=1M, io_uring qd8, end_fsync=1
//   fio direct 16M    fio --direct=1 bs=16M io_uring qd8
//   write loop        write() of 1 MiB pieces + fsync (buffered)
//   relocation copy   writer with a too-small reservation, data moved by copy_file_range
//   relocation shift  the same, moved by FALLOC_FL_INSERT_RANGE
//   reader            ringsafe::reader loading the file (page cache dropped first)
//   cp                `ringsafe cp` of the file (page cache dropped first)
// Prints a table and JSON lines per arm, then the targets with PASS/MISS.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "bench_command.hpp"
#include "bench_report.hpp"
#include "ringsafe/buffer.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"

using namespace ringsafe;
using namespace ringsafe::bench;
namespace fs = std::filesystem;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct tensor_spec {
    std::string name;
    std::uint64_t offset, size;
};

// ~`total` bytes in a few hundred tensors: big matrices, medium and tiny ones.
std::vector<tensor_spec> make_layout(std::uint64_t total) {
    std::vector<tensor_spec> out;
    std::uint64_t off = 0;
    for (int layer = 0; off < total; ++layer) {
        const std::uint64_t sizes[] = {total / 80 + 6 + 2 * static_cast<std::uint64_t>(layer), total / 320 + 10, total / 800 + 6, 4096 * 3 + 2, 2 * 4096};
        const char* parts[] = {"mlp.up", "attn.qkv", "attn.out", "norm", "bias"};
        for (int k = 0; k < 5 && off < total; ++k) {
            std::uint64_t n = std::min(sizes[k] & ~std::uint64_t{1}, total - off);
            out.push_back({"model.layers." + std::to_string(layer) + "." + parts[k], off, n});
            off += n;
        }
    }
    return out;
}

std::uint64_t rss_kib(const char* field) {
    std::ifstream f("/proc/self/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind(field, 0) == 0) return std::stoull(line.substr(std::strlen(field)));
    return 0;
}

void reset_peak_rss() {
    std::ofstream f("/proc/self/clear_refs");
    f << "5";
}

void drop_file_cache(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) return;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t size = 2ull << 30;
    int reps = 5;
    std::string dir = ".", cli;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--quick") size = 256u << 20, reps = 3;
        else if (a == "--size" && i + 1 < argc) size = std::stoull(argv[++i]) << 20;
        else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
        else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
        else if (a == "--cli" && i + 1 < argc) cli = argv[++i];
        else {
            std::fprintf(stderr, "usage: bench_write [--quick] [--size MiB] [--reps N] [--dir DIR] [--cli PATH]\n");
            return 2;
        }
    }
    if (cli.empty()) cli = (fs::path(argv[0]).parent_path() / ".." / "tools" / "ringsafe").string();
    auto layout = make_layout(size);
    std::uint64_t total = layout.back().offset + layout.back().size;
    std::printf("bench_write: %zu tensors, %.3f GB, %d reps, dir %s\n", layout.size(), total / 1e9, reps, dir.c_str());

    const std::uint64_t rss0 = rss_kib("VmRSS:");
    host_buffer src(total);  // huge pages, prefaulted: the caller's tensors
    for (std::uint64_t i = 0; i < total; i += 8) std::memcpy(src.data() + i, &i, std::min<std::uint64_t>(8, total - i));
    const std::uint64_t rss_src = rss_kib("VmRSS:");
    std::printf("source: %s, RSS before %.0f MiB, after %.0f MiB\n", src.pages().label().c_str(), rss0 / 1024.0,
                rss_src / 1024.0);

    const std::string out = (fs::path(dir) / "bench_write.safetensors").string();
    const std::string kept = (fs::path(dir) / "bench_write_src.safetensors").string();
    const std::string copy = (fs::path(dir) / "bench_write_cp.safetensors").string();
    const std::string fio_file = (fs::path(dir) / "bench_write.fio").string();
    std::uint64_t peak_extra_kib = 0;

    auto write_ckpt = [&](const std::string& path, bool zero_copy, std::uint64_t reserve, bool in_place) {
        writer_options o;
        if (reserve) o.reserve_bytes = reserve, o.relocate_in_place = in_place;
        else o.expected_tensors = layout.size(), o.expected_name_length = 32;
        reset_peak_rss();
        std::uint64_t before = rss_kib("VmRSS:");
        double t0 = now();
        writer w(path, o);
        std::shared_ptr<const void> hold(src.data(), [](const void*) {});
        for (auto& t : layout) {
            std::span<const std::byte> bytes(src.data() + t.offset, t.size);
            if (zero_copy) w.add(t.name, dtype::U8, {t.size}, bytes, hold);
            else w.add(t.name, dtype::U8, {t.size}, bytes);
        }
        w.finish();
        double t = now() - t0;
        peak_extra_kib = std::max(peak_extra_kib, rss_kib("VmHWM:") - before);
        if (reserve && w.stats().relocation != (in_place ? "insert_range" : "copy_file_range"))
            std::fprintf(stderr, "warning: relocation was '%s'\n", w.stats().relocation.c_str());
        return t;
    };

    host_buffer dst(total);  // the reader arm's destination
    std::string fio_common = "fio --name=w --filename=" + fio_file + " --size=" + std::to_string(total) +
                             " --rw=write --ioengine=io_uring --iodepth=8 --unlink=1 --output-format=json --output=" +
                             fio_file + ".json ";
    // fio's own runtime (it includes end_fsync), not the process's: startup is not I/O.
    auto fio = [&](const std::string& args) {
        if (run_timed(fio_common + args) < 0) return -1.0;
        std::ifstream f(fio_file + ".json");
        std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        auto at = text.find("\"write\" : {");  // the write section, not the "rw" option
        at = at == std::string::npos ? at : text.find("\"bw_bytes\"", at);
        if (at == std::string::npos) return -1.0;
        double bw = std::stod(text.substr(text.find(':', at) + 1));
        return bw > 0 ? static_cast<double>(total) / bw : -1.0;
    };
    struct arm {
        std::string name, note;
        std::function<double()> run;
        std::vector<double> gbps = {};
    };
    std::vector<arm> arms = {
        {"writer copy", "O_DIRECT 16M staged", [&] { return write_ckpt(out, false, 0, true); }},
        {"writer zero-copy", "O_DIRECT from caller", [&] { return write_ckpt(out, true, 0, true); }},
        {"fio buffered", "bs=1M end_fsync", [&] { return fio("--bs=1M --end_fsync=1"); }},
        {"fio direct 16M", "--direct=1 bs=16M", [&] { return fio("--bs=16M --direct=1"); }},
        {"write loop", "write(1M)+fsync", [&] {
             double t0 = now();
             int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
             for (std::uint64_t off = 0; off < total;) {
                 auto n = ::write(fd, src.data() + off, std::min<std::uint64_t>(1u << 20, total - off));
                 if (n <= 0) return -1.0;
                 off += static_cast<std::uint64_t>(n);
             }
             ::fsync(fd);
             ::close(fd);
             return now() - t0;
         }},
        {"relocation copy", "writer + copy_file_range", [&] { return write_ckpt(out, false, 64, false); }},
        {"relocation shift", "writer + INSERT_RANGE", [&] { return write_ckpt(out, false, 64, true); }},
        {"reader", "load all, cache dropped", [&] {
             drop_file_cache(kept);
             double t0 = now();  // dst (the caller's buffer) was allocated and touched before
             auto r = reader::open(kept);
             r.read_packed(r.all(), dst.span(), 1);
             return now() - t0;
         }},
        {"cp", "ringsafe cp, cache dropped", [&] {
             drop_file_cache(kept);
             return run_timed(cli + " cp " + kept + " " + copy + " --json > " + copy + ".json");
         }},
    };
    write_ckpt(kept, false, 0, true);  // the source of the reader and cp arms
    long cp_rss = 0;
    for (int rep = 0; rep < reps; ++rep) {
        for (auto& a : arms) {
            double t = a.run();
            fs::remove(out);
            fs::remove(copy);
            a.gbps.push_back(t > 0 ? total / t / 1e9 : 0);
            std::fprintf(stderr, "rep %d %-18s %.2f GB/s\n", rep, a.name.c_str(), a.gbps.back());
        }
    }
    {  // cp reports its own peak RSS (a forked child's would include this process's pages)
        std::ifstream f(copy + ".json");
        std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        auto at = text.find("\"peak_rss_kib\":");
        if (at != std::string::npos) cp_rss = std::stol(text.substr(at + 15));
    }
    fs::remove(copy + ".json");
    fs::remove(copy);
    fs::remove(kept);
    fs::remove(fio_file + ".json");
    fs::remove(copy + ".json");

    std::vector<arm_result> rows;
    for (auto& a : arms) {
        arm_result r;
        r.case_name = "write " + std::to_string(layout.size()) + " tensors";
        r.arm = a.name;
        r.dst_pages = "disk";
        r.bytes = static_cast<double>(total);
        r.gbps = a.gbps;
        r.note = a.note;
        rows.push_back(r);
    }
    print_case(rows, "fio direct 16M");
    auto med = [&](const std::string& n) {
        for (auto& r : rows)
            if (r.arm == n) return r.median();
        return 0.0;
    };
    auto seconds = [&](const std::string& n) { return med(n) > 0 ? total / 1e9 / med(n) : 0.0; };
    double writer_best = std::max(med("writer copy"), med("writer zero-copy"));
    // Relocation speed: bytes moved / the time it adds to the same write.
    double reloc_copy_s = seconds("relocation copy") - seconds("writer copy");
    double reloc_copy_gbps = reloc_copy_s > 0 ? total / 1e9 / reloc_copy_s : 1e9;
    std::printf("relocation by copy_file_range adds %.3f s (%.2f GB/s); by INSERT_RANGE adds %.3f s\n", reloc_copy_s,
                reloc_copy_gbps, seconds("relocation shift") - seconds("writer copy"));
    std::printf("peak memory beyond the caller's buffers (writer arms, VmHWM - RSS before): %.1f MiB; cp max RSS %.1f MiB\n",
                peak_extra_kib / 1024.0, cp_rss / 1024.0);
    std::vector<target> targets = {
        {"writer copy / fio direct 16M", med("writer copy") / med("fio direct 16M"), 0.8},
        {"writer zero-copy / fio direct 16M", med("writer zero-copy") / med("fio direct 16M"), 0.8},
        {"writer copy / write loop+fsync", med("writer copy") / med("write loop"), 2.0},
        {"peak memory beyond caller buffers (MiB)", peak_extra_kib / 1024.0, 64, true},
        {"relocation (copy_file_range) / write loop", reloc_copy_gbps / med("write loop"), 0.8},
        {"cp / min(reader, best writer)", med("cp") / std::min(med("reader"), writer_best), 0.8},
    };
    for (auto& t : targets)
        if (!(t.measured > 0) || t.measured > 1e6) t.known = false;  // an arm that could not run
    print_targets(targets);
    return 0;
}
