// bench_cp: is `ringsafe cp` a pipeline (as fast as the slower of its reader
// and its writer alone), and how does URL -> local file compare with the
// user-level downloaders, in the same run?
//
//   bench_cp [--size SIZE] [--reps N] [--dir DIR] [--cli PATH] [--s3-size SIZE] [--no-s3] [--no-peers]
//
// A checkpoint of a few hundred tensors (SIZE, default 2G) is written to DIR
// (default: the current directory), served by nginx and uploaded to a
// throwaway radosgw (Ceph, memstore: a second checkpoint of --s3-size, default
// 768M, since the test cluster's store holds 1 GiB). Then, repetitions interleaved, every
// arm moves it into DIR, page cache hot (dropping caches is not reliable
// here: the source is in the page cache for every arm):
//   local   reader alone     `ringsafe load FILE --json` (its own seconds: destination prefaulted first)
//           writer alone     the streaming writer from memory (zero-copy O_DIRECT), fsync / no fsync
//           cp               `ringsafe cp FILE OUT --json` (wall time), and with --no-sync
//   nginx   reader alone     `ringsafe load URL --json`
//           cp               `ringsafe cp URL OUT`, with --no-sync, with --no-sync --no-direct, and
//                            with --no-sync --connections 16 (the peers' concurrency; default 32)
//           aria2c           `aria2c -x16 -s16` (no fsync)
//           rclone           `rclone copy :http: --multi-thread-streams 16 --ignore-checksum` (no fsync)
//   radosgw the same with s3://bucket/key (AWS_* environment), aria2c on a presigned URL,
//           rclone `:s3:` with --s3-provider Ceph (AWS_CA_BUNDLE unset: rclone refuses it on plain http)
// Prints a table per case (GB/s = 1e9 bytes/s, medians), cp's peak RSS, and
// the targets with PASS/MISS against baselines measured in this run.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "bench_command.hpp"
#include "bench_report.hpp"
#include "ringsafe/http.hpp"
#include "http_harness.hpp"
#include "radosgw_cluster.hpp"
#include "ringsafe/buffer.hpp"
#include "ringsafe/open_source.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"

using namespace ringsafe;
using namespace ringsafe::bench;
namespace fs = std::filesystem;

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

double json_number(const std::string& text, const std::string& key) {
    auto at = text.find("\"" + key + "\":");
    return at == std::string::npos ? -1 : std::atof(text.c_str() + at + key.size() + 3);
}

struct arm {
    std::string name, command;
    std::function<double()> run;  // seconds, -1 when it failed
    std::vector<double> gbps = {};
};

// A checkpoint of about `size` bytes at `path`: a few hundred tensors, mixed
// sizes, not 4 KiB multiples. Returns its tensor bytes.
std::uint64_t make_checkpoint(const fs::path& path, std::uint64_t size) {
    std::uint64_t total = 0;
    writer_options o;
    o.sync = o.sync_dir = false;
    o.expected_tensors = 1024;
    writer w(path.string(), o);
    std::vector<std::byte> chunk(std::min<std::uint64_t>(size / 80 + 4096, 64u << 20));
    for (std::size_t i = 0; i < chunk.size(); i += 8) {
        std::uint64_t v = i * 0x9E3779B97F4A7C15ull;
        std::memcpy(chunk.data() + i, &v, std::min<std::size_t>(8, chunk.size() - i));
    }
    for (int layer = 0; total < size; ++layer) {
        const std::uint64_t sizes[] = {size / 80 + 6, size / 320 + 10, size / 800 + 6, 4096 * 3 + 2, 2 * 4096};
        const char* parts[] = {"mlp.up", "attn.qkv", "attn.out", "norm", "bias"};
        for (int k = 0; k < 5 && total < size; ++k) {
            std::uint64_t n = std::min(sizes[k] & ~std::uint64_t{1}, size - total);
            w.begin("model.layers." + std::to_string(layer) + "." + parts[k], dtype::U8, {n});
            for (std::uint64_t at = 0; at < n; at += chunk.size())
                w.append(std::span(chunk.data(), std::min<std::uint64_t>(chunk.size(), n - at)));
            w.end();
            total += n;
        }
    }
    w.finish();
    return total;
}

}  // namespace

int main(int argc, char** argv) {
    std::uint64_t size = 2ull << 30;
    int reps = 3;
    std::string dir = ".", cli;
    std::uint64_t s3_size = 768u << 20;  // the test cluster's memstore holds 1 GiB
    bool s3 = true, peers = true;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--size" && i + 1 < argc) size = parse_size(argv[++i]);
        else if (a == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
        else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
        else if (a == "--cli" && i + 1 < argc) cli = argv[++i];
        else if (a == "--s3-size" && i + 1 < argc) s3_size = parse_size(argv[++i]);
        else if (a == "--no-s3") s3 = false;
        else if (a == "--no-peers") peers = false;
        else {
            std::fprintf(stderr, "usage: bench_cp [--size SIZE] [--reps N] [--dir DIR] [--cli PATH] [--s3-size SIZE] [--no-s3] [--no-peers]\n");
            return 2;
        }
    }
    if (cli.empty()) cli = (fs::path(argv[0]).parent_path() / ".." / "tools" / "ringsafe").string();
    if (peers && std::system("command -v aria2c >/dev/null && command -v rclone >/dev/null") != 0) {
        std::fprintf(stderr, "bench_cp: aria2c or rclone not found (`bash tools/dev.sh bench` installs both); "
                             "the peer arms are left out\n");
        peers = false;
    }
    cli = fs::absolute(cli).string();
    const fs::path work = fs::absolute(fs::path(dir) / "bench_cp.work");
    fs::remove_all(work);
    fs::create_directories(work / "www");
    fs::create_directories(work / "out");
    const fs::path src = work / "www" / "model.safetensors";
    const std::string out = (work / "out" / "copy.safetensors").string();

    const std::uint64_t total = make_checkpoint(src, size);
    auto r = reader::open(src.string());
    std::printf("bench_cp: %zu tensors, %.3f GB (file %.3f GB), %d reps, dir %s, page cache hot\n", r.tensors().size(),
                total / 1e9, fs::file_size(src) / 1e9, reps, work.c_str());

    // The writer alone: the data section in memory (huge pages), written zero-copy.
    host_buffer data(total);
    open_source(src.string())->read_exact(r.shards()[0].data_start, data.span());
    auto writer_alone = [&](bool sync) {
        writer_options o;
        o.sync = o.sync_dir = sync;
        o.reserve_bytes = r.shards()[0].data_start - 8;
        double t0 = now();
        writer w(out, o);
        std::shared_ptr<const void> hold(data.data(), [](const void*) {});
        for (auto& t : r.tensors()) w.add(t.name, t.dtype, t.shape, std::span(data.data() + t.begin, t.size()), hold);
        w.finish();
        return now() - t0;
    };

    test::nginx_server ng(work / "nginx", {work / "www", "", "", nullptr, 2, 0});
    const std::string url = ng.base_url() + "/model.safetensors";
    std::unique_ptr<test::radosgw_cluster> rgw;
    std::string presigned;
    std::uint64_t s3_total = 0;
    if (s3) {
        rgw = std::make_unique<test::radosgw_cluster>(work / "ceph");
        s3_total = make_checkpoint(work / "s3model.safetensors", std::min(s3_size, size));
        if (rgw->create_bucket("bench") != 200 ||
            rgw->put_object("bench", "model.safetensors", work / "s3model.safetensors") != 200) {
            std::fprintf(stderr, "radosgw: bucket or upload failed\n");
            return 1;
        }
        fs::remove(work / "s3model.safetensors");
        ::setenv("AWS_ACCESS_KEY_ID", test::radosgw_cluster::access_key, 1);
        ::setenv("AWS_SECRET_ACCESS_KEY", test::radosgw_cluster::secret_key, 1);
        ::setenv("AWS_ENDPOINT_URL", rgw->endpoint().c_str(), 1);
        ::setenv("AWS_REGION", "us-east-1", 1);
        s3_options so;
        so.access_key_id = test::radosgw_cluster::access_key;
        so.secret_access_key = test::radosgw_cluster::secret_key;
        so.endpoint = rgw->endpoint();
        presigned = presign_s3_url("s3://bench/model.safetensors", so, std::chrono::seconds(7200));
    }

    long cp_rss_kib = 0;
    const std::string outdir = (work / "out").string();
    auto cp_arm = [&](const std::string& from, const std::string& extra) {
        return arm{"ringsafe cp" + extra, cli + " cp " + from + " " + out + extra + " --json", {}};
    };
    struct bench_case {
        std::string name;
        std::uint64_t bytes;
        std::vector<arm> arms;
    };
    std::vector<bench_case> cases;
    {
        std::vector<arm> local = {
            {"reader alone", cli + " load " + src.string() + " --json", {}},
            {"writer alone", "writer::add zero-copy, O_DIRECT + fsync (in process)", [&] { return writer_alone(true); }},
            {"writer alone --no-sync", "the same without fsync", [&] { return writer_alone(false); }},
            cp_arm(src.string(), ""),
            cp_arm(src.string(), " --no-sync"),
        };
        cases.push_back({"local file", total, std::move(local)});
    }
    auto remote = [&](const std::string& name, std::uint64_t bytes, const std::string& from,
                      const std::string& plain_url, const std::string& rclone_cmd) {
        std::vector<arm> v = {
            {"reader alone", cli + " load '" + from + "' --json", {}},
            cp_arm("'" + from + "'", ""),
            cp_arm("'" + from + "'", " --no-sync"),
            cp_arm("'" + from + "'", " --no-sync --no-direct"),
            cp_arm("'" + from + "'", " --no-sync --connections 16"),  // the peers' concurrency
        };
        if (peers) {
            v.push_back({"aria2c -x16 -s16", "aria2c -q -x16 -s16 --allow-overwrite=true -d " + outdir +
                                                 " -o copy.safetensors '" + plain_url + "'",
                         {}});
            v.push_back({"rclone 16 streams", rclone_cmd, {}});
        }
        cases.push_back({name, bytes, std::move(v)});
    };
    remote("nginx", total, url, url,
           "rclone copyto --config /dev/null --http-url " + ng.base_url() + " :http:model.safetensors " + out +
               " --multi-thread-streams 16 --ignore-checksum");
    if (s3)
        remote("radosgw", s3_total, "s3://bench/model.safetensors", presigned,
               "env -u AWS_CA_BUNDLE rclone copyto --config /dev/null :s3:bench/model.safetensors " + out +
                   " --s3-provider Ceph --s3-endpoint " + rgw->endpoint() + " --s3-access-key-id " +
                   test::radosgw_cluster::access_key + " --s3-secret-access-key " + test::radosgw_cluster::secret_key +
                   " --multi-thread-streams 16 --ignore-checksum");
    for (auto& [cname, cbytes, arms] : cases)
        for (auto& a : arms)
            if (!a.run) {
                const std::string cmd = a.command;
                const bool load = a.name == "reader alone", cp = a.name.rfind("ringsafe cp", 0) == 0;
                a.run = [&, cmd, load, cp] {
                    if (cp) {
                        // cp's own VmHWM: a forked child's ru_maxrss would count this
                        // process's 2 GiB source buffer, mapped in the child until exec.
                        std::string j = (work / "cp.json").string();
                        double t = run_timed(cmd + " > " + j);
                        cp_rss_kib = std::max<long>(cp_rss_kib, static_cast<long>(json_number(slurp(j), "peak_rss_kib")));
                        return t;
                    }
                    if (!load) return run_timed(cmd);
                    std::string j = (work / "load.json").string();
                    if (run_timed(cmd + " > " + j) < 0) return -1.0;
                    return json_number(slurp(j), "seconds");
                };
            }

    ::sync();  // the source files' writeback is not the first arm's
    for (int rep = 0; rep < reps; ++rep)
        for (auto& [cname, cbytes, arms] : cases)
            for (auto& a : arms) {
                double t = a.run();
                // Every arm starts from the same state: no output, nothing left for the
                // file system to commit (the previous output's freed blocks, discarded at
                // the next journal commit, would otherwise land in the next arm's fsync).
                fs::remove(out);
                ::sync();
                a.gbps.push_back(t > 0 ? cbytes / t / 1e9 : 0);
                std::fprintf(stderr, "rep %d %-10s %-24s %.3f GB/s\n", rep, cname.c_str(), a.name.c_str(), a.gbps.back());
            }

    std::vector<target> targets;
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
    };
    double writer_sync = 0, writer_nosync = 0;
    for (auto& [cname, cbytes, arms] : cases) {
        std::vector<arm_result> rows;
        for (auto& a : arms) {
            arm_result row;
            row.case_name = "cp " + cname;
            row.arm = a.name;
            row.dst_pages = "disk";
            row.bytes = static_cast<double>(cbytes);
            row.gbps = a.gbps;
            row.note = a.command;
            rows.push_back(row);
        }
        std::printf("\n== %s ==\n", cname.c_str());
        print_case(rows, "reader alone");
        auto med = [&](const std::string& n) {
            for (auto& a : arms)
                if (a.name == n) return median(a.gbps);
            return 0.0;
        };
        if (cname == "local file") writer_sync = med("writer alone"), writer_nosync = med("writer alone --no-sync");
        double reader = med("reader alone");
        targets.push_back({cname + ": cp / min(reader, writer)", med("ringsafe cp") / std::min(reader, writer_sync), 0.85});
        targets.push_back({cname + ": cp --no-sync / min(reader, writer --no-sync)",
                           med("ringsafe cp --no-sync") / std::min(reader, writer_nosync), 0.85});
        if (cname != "local file" && peers) {
            targets.push_back({cname + ": cp --no-sync / aria2c -x16", med("ringsafe cp --no-sync") / med("aria2c -x16 -s16"), 2.0});
            targets.push_back({cname + ": cp --no-sync / rclone 16 streams", med("ringsafe cp --no-sync") / med("rclone 16 streams"), 1.5});
            targets.push_back({cname + ": cp (fsync) / aria2c -x16", med("ringsafe cp") / med("aria2c -x16 -s16"), 2.0});
            targets.push_back({cname + ": cp (fsync) / rclone 16 streams", med("ringsafe cp") / med("rclone 16 streams"), 1.5});
            targets.push_back({cname + ": cp --no-sync --connections 16 / rclone 16 streams",
                               med("ringsafe cp --no-sync --connections 16") / med("rclone 16 streams"), 1.5});
        }
    }
    std::printf("\ncp peak RSS (largest VmHWM over all cp runs): %.1f MiB; buffers 4 x 64 MiB = 256 MiB; beyond them %.1f MiB\n",
                cp_rss_kib / 1024.0, cp_rss_kib / 1024.0 - 256);
    targets.push_back({"cp memory beyond its buffers (MiB)", cp_rss_kib / 1024.0 - 256, 64, true});
    for (auto& t : targets)
        if (!(t.measured > 0) || t.measured > 1e6) t.known = false;
    print_targets(targets);
    fs::remove_all(work / "www");
    fs::remove_all(work / "out");
    return 0;
}
