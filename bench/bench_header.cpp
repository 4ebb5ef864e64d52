// Question: how fast is ringsafe's header parse + validation compared with
// Boost.JSON's DOM parse (no validation) of the same bytes?
//
// Generates a ~10 MB header of 100,000 tensors shaped like a real checkpoint
// (model.layers.N.* names, BF16/F32/I32/U8/F8 dtypes, 1-3 dims, __metadata__),
// written in the reference writer's order; a second copy lists the same
// entries in shuffled key order (the parser then has to sort). Arms run
// interleaved, --reps times (default 9); medians are reported.
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ringsafe/header.hpp"

namespace json = boost::json;
using namespace ringsafe;

namespace {

struct layer_tensor {
    const char* suffix;
    dtype type;
    std::vector<std::uint64_t> shape;
};

std::vector<tensor_entry> make_entries(std::size_t count) {
    const std::vector<layer_tensor> per_layer = {
        {"self_attn.q_proj.weight", dtype::BF16, {4096, 4096}},
        {"self_attn.k_proj.weight", dtype::BF16, {1024, 4096}},
        {"self_attn.v_proj.weight", dtype::BF16, {1024, 4096}},
        {"self_attn.o_proj.weight", dtype::BF16, {4096, 4096}},
        {"self_attn.q_proj.bias", dtype::BF16, {4096}},
        {"mlp.gate_proj.qweight", dtype::I32, {512, 14336}},
        {"mlp.gate_proj.scales", dtype::F16, {32, 14336}},
        {"mlp.gate_proj.g_idx", dtype::I32, {4096}},
        {"mlp.up_proj.weight", dtype::F8_E4M3, {14336, 4096}},
        {"mlp.up_proj.weight_scale", dtype::F32, {1}},
        {"mlp.down_proj.weight", dtype::BF16, {4096, 14336}},
        {"mlp.experts.gate_up_proj", dtype::BF16, {8, 4096, 28672}},
        {"mlp.router.mask", dtype::U8, {8, 64}},
        {"input_layernorm.weight", dtype::F32, {4096}},
        {"post_attention_layernorm.weight", dtype::F32, {4096}},
        {"rotary_emb.inv_freq", dtype::F32, {64}},
    };
    std::vector<tensor_entry> out;
    for (std::size_t i = 0; out.size() < count; ++i) {
        const layer_tensor& t = per_layer[i % per_layer.size()];
        std::string name = "model.layers.";
        name.append(std::to_string(i / per_layer.size())).append(".").append(t.suffix);
        out.push_back({std::move(name), t.type, t.shape, 0, 0});
    }
    // Offsets as the reference writer lays them out: dtype descending, then name.
    std::sort(out.begin(), out.end(), reference_writer_order);
    std::uint64_t off = 0;
    for (auto& e : out) {
        std::uint64_t n = 1;
        for (auto d : e.shape) n *= d;
        e.begin = off;
        e.end = off += n * dtype_bits(e.dtype) / 8;
    }
    return out;
}

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

struct arm {
    const char* name;
    const std::string* json;
    int kind;  // 0 DOM, 1 DOM + monotonic_resource, 2 ringsafe
    std::vector<double> seconds;
};

}  // namespace

int main(int argc, char** argv) {
    int reps = 9;
    std::size_t tensors = 100000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--reps")) reps = std::max(5, std::atoi(argv[i + 1]));
        else if (!std::strcmp(argv[i], "--tensors")) tensors = std::strtoull(argv[i + 1], nullptr, 10);
    }
    auto entries = make_entries(tensors);
    metadata_map meta{{"format", "pt"}, {"source", "ringsafe bench_header"}};
    const std::string ordered = serialize_header(entries, &meta);
    std::shuffle(entries.begin(), entries.end(), std::mt19937_64(42));
    const std::string shuffled = serialize_header(entries, &meta);
    std::uint64_t data_size = 0;
    for (auto& e : entries) data_size = std::max(data_size, e.end);
    const std::uint64_t file_size = 8 + ordered.size() + data_size;

    std::vector<arm> arms = {
        {"boost_json_parse_dom", &ordered, 0, {}},
        {"boost_json_parse_dom_monotonic", &ordered, 1, {}},
        {"ringsafe_parse_header", &ordered, 2, {}},
        {"ringsafe_parse_header_shuffled", &shuffled, 2, {}},
    };
    std::size_t sink = 0;
    for (int r = 0; r < reps; ++r) {
        for (auto& a : arms) {
            if (a.kind == 2) {
                double t0 = now_s();
                header h = parse_header(*a.json, file_size);
                a.seconds.push_back(now_s() - t0);
                sink += h.tensors.size();
            } else if (a.kind == 1) {
                json::monotonic_resource mr;
                double t0 = now_s();
                json::value v = json::parse(*a.json, &mr);
                a.seconds.push_back(now_s() - t0);
                sink += v.as_object().size();
            } else {
                double t0 = now_s();
                json::value v = json::parse(*a.json);
                a.seconds.push_back(now_s() - t0);
                sink += v.as_object().size();
            }
        }
    }
    if (sink != static_cast<std::size_t>(reps) * (4 * tensors + 2)) {
        std::fprintf(stderr, "bench_header: unexpected parse results\n");
        return 1;
    }
    const double mb = static_cast<double>(ordered.size()) / 1e6;
    const double dom = mb / median(arms[0].seconds);
    // Also the median of per-repetition ratios (DOM time / arm time of the same
    // round), which is steadier than the ratio of medians on a shared machine.
    auto paired = [&](const arm& a) {
        std::vector<double> r;
        for (int i = 0; i < reps; ++i) r.push_back(arms[0].seconds[i] / a.seconds[i]);
        return median(r);
    };
    for (auto& a : arms) {
        double s = median(a.seconds), rate = static_cast<double>(a.json->size()) / 1e6 / s;
        std::printf("{\"bench\":\"header_parse\",\"arm\":\"%s\",\"tensors\":%zu,\"header_bytes\":%zu,\"reps\":%d,"
                    "\"median_ms\":%.3f,\"mb_per_s\":%.1f,\"ratio_vs_dom\":%.3f,\"paired_ratio_vs_dom\":%.3f}\n",
                    a.name, tensors, a.json->size(), reps, s * 1e3, rate, rate / dom, paired(a));
    }
    std::printf("\nheader: %zu tensors, %.2f MB of JSON; median of %d interleaved repetitions\n", tensors, mb, reps);
    std::printf("%-32s %10s %10s %12s %14s\n", "arm", "ms", "MB/s", "vs DOM parse", "paired ratio");
    for (auto& a : arms) {
        double s = median(a.seconds), rate = static_cast<double>(a.json->size()) / 1e6 / s;
        std::printf("%-32s %10.2f %10.1f %11.2fx %13.2fx\n", a.name, s * 1e3, rate, rate / dom, paired(a));
    }
    return 0;
}
