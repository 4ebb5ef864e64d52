// `ringsafe demo`: the quick start's main job. Writes a sample checkpoint with
// the streaming writer, then loads a selection and the whole file with the
// reader, next to an mmap+memcpy baseline (the reference's path) measured in
// the same run, into the same huge-page destination.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "args.hpp"
#include "command.hpp"
#include "ringsafe/buffer.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"

namespace ringsafe::cli {
namespace {

constexpr const char* help_text =
    "usage: ringsafe demo [--dir DIR] [--size SIZE] [--reps N] [--keep]\n"
    "Writes a sample checkpoint (about SIZE bytes, default 1G, a few hundred tensors of\n"
    "mixed dtypes) with the streaming writer into DIR (default: a new temporary directory),\n"
    "then loads the tensors matching 'model.layers.*.mlp.*' and the whole file with the\n"
    "reader, and the whole file with mmap+memcpy, into the same huge-page buffer.\n"
    "Prints GB/s (10^9 bytes/s; median of N repetitions, default 5) and ratios.\n"
    "  --keep   leave the checkpoint in DIR\n";

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// The sample model: embeddings, N transformer layers of mixed dtypes, a head.
struct sample_tensor {
    std::string name;
    dtype type;
    std::vector<std::uint64_t> shape;
};

std::vector<sample_tensor> sample_layout(std::uint64_t target_bytes) {
    // A layer at hidden size h is 15 h^2 + 12 h bytes; pick h (a multiple of 256)
    // so that about 32 layers (a few hundred tensors) make up the target.
    std::uint64_t h = 256;
    while (15 * (h + 256) * (h + 256) * 32 <= target_bytes) h += 256;
    std::uint64_t layer_bytes = 15 * h * h + 12 * h;
    std::uint64_t fixed = 2 * 4096 * h * 2 + 4 * h + 8 * 4096;  // embeddings, head, norm
    std::uint64_t layers =
        target_bytes > fixed ? std::max<std::uint64_t>(1, (target_bytes - fixed) / layer_bytes) : 1;
    std::vector<sample_tensor> out;
    out.push_back({"model.embed_tokens.weight", dtype::BF16, {4096, h}});
    for (std::uint64_t l = 0; l < layers; ++l) {
        std::string p = "model.layers." + std::to_string(l) + ".";
        out.push_back({p + "input_layernorm.weight", dtype::F32, {h}});
        out.push_back({p + "self_attn.q_proj.weight", dtype::BF16, {h, h}});
        out.push_back({p + "self_attn.k_proj.weight", dtype::BF16, {h / 4, h}});
        out.push_back({p + "self_attn.v_proj.weight", dtype::BF16, {h / 4, h}});
        out.push_back({p + "self_attn.o_proj.weight", dtype::F16, {h, h}});
        out.push_back({p + "post_attention_layernorm.weight", dtype::F32, {h}});
        out.push_back({p + "mlp.gate_proj.weight", dtype::F8_E4M3, {2 * h, h}});
        out.push_back({p + "mlp.up_proj.weight", dtype::BF16, {2 * h, h}});
        out.push_back({p + "mlp.down_proj.weight", dtype::BF16, {h, 2 * h}});
        out.push_back({p + "mlp.down_proj.scale", dtype::F32, {h}});
    }
    out.push_back({"model.norm.weight", dtype::F32, {h}});
    out.push_back({"lm_head.weight", dtype::BF16, {4096, h}});
    out.push_back({"lm_head.bias", dtype::I64, {4096}});
    return out;
}

std::uint64_t bytes_of(const sample_tensor& t) {
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    return *dtype_bytes_for(t.type, n);
}

// Writes the sample with the streaming writer; returns seconds (durable at the end).
double write_sample(const std::string& path, const std::vector<sample_tensor>& layout) {
    std::uint64_t biggest = 0;
    for (auto& t : layout) biggest = std::max(biggest, bytes_of(t));
    host_buffer scratch(biggest);
    auto t0 = clock_type::now();
    writer w(path, writer_options{.expected_tensors = layout.size()});
    std::uint64_t seed = 1;
    for (auto& t : layout) {
        auto bytes = scratch.span(0, bytes_of(t));
        auto* words = reinterpret_cast<std::uint64_t*>(bytes.data());
        for (std::size_t i = 0; i < bytes.size() / 8; ++i) words[i] = (seed++) * 0x9E3779B97F4A7C15ull;
        w.add(t.name, t.type, t.shape, bytes);  // copied before add() returns
    }
    w.finish(metadata_map{{"format", "pt"}, {"producer", "ringsafe demo"}});
    return seconds_since(t0);
}

// The reference's path: mmap the file, memcpy every tensor into the arena (one thread).
double mmap_copy(const std::string& path, const reader& r, const read_plan& plan,
                 std::span<std::byte> arena) {
    auto t0 = clock_type::now();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) raise_errno(errno, "open " + path);
    struct stat st {};
    ::fstat(fd, &st);
    void* m = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) raise_errno(errno, "mmap " + path);
    auto* base = static_cast<const std::byte*>(m) + r.shards()[0].data_start;
    auto tensors = r.tensors();
    for (auto& p : plan.placements())
        std::memcpy(arena.data() + p.offset, base + tensors[p.tensor].begin, p.size);
    ::munmap(m, static_cast<std::size_t>(st.st_size));
    return seconds_since(t0);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int run(const std::vector<std::string_view>& args) {
    arg_parser ap(args);
    ap.flag("--help");
    ap.flag("--keep");
    ap.option("--dir");
    ap.option("--size");
    ap.option("--reps");
    try {
        ap.parse();
        if (ap.has("--help")) return std::fputs(help_text, stdout), exit_ok;
        if (!ap.positional().empty()) throw usage_error{"unexpected argument " + ap.positional()[0]};
        std::uint64_t size = ap.size_or("--size", 1ull << 30);
        std::uint64_t reps = std::max<std::uint64_t>(1, ap.uint_or("--reps", 5));
        if (size < (16u << 20)) throw usage_error{"--size must be at least 16M"};

        namespace fs = std::filesystem;
        fs::path dir = ap.value("--dir").value_or("");
        bool made_dir = dir.empty();
        if (made_dir) {
            std::string tmpl = (fs::temp_directory_path() / "ringsafe-demo-XXXXXX").string();
            if (!::mkdtemp(tmpl.data())) raise_errno(errno, "mkdtemp " + tmpl);
            dir = tmpl;
        }
        fs::create_directories(dir);
        std::string path = (dir / "sample.safetensors").string();

        auto layout = sample_layout(size);
        std::printf("writing %zu tensors to %s with the streaming writer ...\n", layout.size(),
                    path.c_str());
        double wsec = write_sample(path, layout);
        auto file_size = fs::file_size(path);
        std::printf("  wrote %s in %.2f s: %.2f GB/s (durable: fsync + rename)\n",
                    human_bytes(file_size).c_str(), wsec, file_size / wsec / 1e9);

        auto r = reader::open(path);
        auto all = r.all();
        auto mlp = r.select_glob("model.layers.*.mlp.*");
        host_buffer arena(r.packed_size(all));  // huge pages, prefaulted: as a loader's would be
        auto plan_all = r.plan_packed(all, arena.span());
        auto plan_mlp = r.plan_packed(mlp, arena.span());
        r.execute(plan_all);  // warm the page cache: the writer used O_DIRECT

        std::vector<double> t_all, t_mlp, t_mmap;
        for (std::uint64_t i = 0; i < reps; ++i) {  // arms interleaved
            auto t0 = clock_type::now();
            auto rr = reader::open(path);  // open + header + reads, as `ringsafe load` times it
            rr.execute(rr.plan_packed(rr.all(), arena.span()));
            t_all.push_back(seconds_since(t0));
            t0 = clock_type::now();
            r.execute(plan_mlp);
            t_mlp.push_back(seconds_since(t0));
            t_mmap.push_back(mmap_copy(path, r, plan_all, arena.span()));
        }
        // Check the reader's bytes against the mmap copy once.
        host_buffer check(arena.size());
        r.execute(r.plan_packed(all, check.span()));
        bool same = std::memcmp(check.data(), arena.data(), arena.size()) == 0;

        double all_gbps = plan_all.total_bytes() / median(t_all) / 1e9;
        double mlp_gbps = plan_mlp.total_bytes() / median(t_mlp) / 1e9;
        double mmap_gbps = plan_all.total_bytes() / median(t_mmap) / 1e9;
        std::printf("\nloading into a %s destination (page cache hot), median of %llu:\n",
                    arena.pages().label().c_str(), static_cast<unsigned long long>(reps));
        std::printf("  %-34s %10s %8s %9s\n", "arm", "bytes", "GB/s", "vs mmap");
        std::printf("  %-34s %10s %8.2f %8.2fx\n", "ringsafe, whole file",
                    human_bytes(plan_all.total_bytes()).c_str(), all_gbps, all_gbps / mmap_gbps);
        std::printf("  %-34s %10s %8.2f %8.2fx\n", "ringsafe, 'model.layers.*.mlp.*'",
                    human_bytes(plan_mlp.total_bytes()).c_str(), mlp_gbps, mlp_gbps / mmap_gbps);
        std::printf("  %-34s %10s %8.2f %8.2fx\n", "mmap + memcpy (reference's path)",
                    human_bytes(plan_all.total_bytes()).c_str(), mmap_gbps, 1.0);
        std::printf("bytes identical to the mmap copy: %s\n", same ? "yes" : "NO");

        if (ap.has("--keep")) std::printf("checkpoint kept at %s\n", path.c_str());
        else if (made_dir) fs::remove_all(dir);
        else fs::remove(path);
        return same ? exit_ok : exit_invalid;
    } catch (const usage_error& e) {
        std::fprintf(stderr, "ringsafe demo: %s\n\n%s", e.message.c_str(), help_text);
        return exit_usage;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ringsafe demo: %s\n", e.what());
        return exit_invalid;
    }
}

const command_registration reg{"demo", "write a sample checkpoint and load it (quick start)", &run};

}  // namespace
}  // namespace ringsafe::cli
