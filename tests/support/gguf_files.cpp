// GGUF files for tests, through ringsafe's own serializer.
#include "gguf_files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "test_support.hpp"

namespace ringsafe::test {
namespace {

using gguf::metadata_entry;
using gguf::value_type;

std::uint64_t padded(std::uint64_t n, std::uint32_t a) { return (n + a - 1) / a * a; }

std::uint64_t tensor_size(const gguf::tensor_record& t) {
    std::uint64_t n = 1;
    for (auto d : t.ne) n *= d;
    const auto bytes = ggml_bytes_for(t.type, n);
    if (!bytes) throw std::logic_error("no size for tensor " + t.name);
    return *bytes;
}

// A deterministic stream of numbers.
struct lcg {
    std::uint64_t s;
    std::uint64_t next() {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        return s >> 33;
    }
};

std::string word(lcg& r) {
    static constexpr std::string_view letters = "etaoinshrdlucmfwypvbgkjqxz";
    const std::size_t n = 1 + r.next() % 4 + r.next() % 5;  // 1..8, mostly 3..6
    std::string w;
    for (std::size_t i = 0; i < n; ++i) w += letters[(r.next() % letters.size() + r.next() % 8) % letters.size()];
    return w;
}

}  // namespace

std::vector<std::byte> gguf_tensor_bytes(std::uint64_t nbytes, std::uint64_t seed, std::size_t i) {
    std::vector<std::byte> out(nbytes);
    fill_pattern(out, seed + i);
    return out;
}

std::vector<std::byte> make_gguf(const std::vector<metadata_entry>& metadata,
                                 const std::vector<gguf::tensor_record>& tensors, std::uint64_t seed,
                                 std::uint32_t alignment) {
    const std::string head = gguf::serialize(metadata, tensors, alignment);
    std::vector<std::byte> out(reinterpret_cast<const std::byte*>(head.data()),
                               reinterpret_cast<const std::byte*>(head.data()) + head.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const std::uint64_t n = tensor_size(tensors[i]);
        const auto bytes = gguf_tensor_bytes(n, seed, i);
        out.insert(out.end(), bytes.begin(), bytes.end());
        out.resize(out.size() + (padded(n, alignment) - n));
    }
    return out;
}

std::string split_name(const std::string& stem, std::size_t part, std::size_t count) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "-%05zu-of-%05zu.gguf", part, count);
    return stem + buf;
}

std::vector<metadata_entry> split_keys(std::size_t no, std::size_t count, std::size_t tensors_count) {
    return {metadata_entry::make("split.no", value_type::UINT16, std::uint64_t{no}),
            metadata_entry::make("split.count", value_type::UINT16, std::uint64_t{count}),
            metadata_entry::make("split.tensors.count", value_type::INT32, std::int64_t(tensors_count))};
}

std::vector<metadata_entry> llama_metadata(std::size_t vocab, std::size_t merges) {
    std::vector<metadata_entry> m;
    auto str = [&](const char* k, std::string_view v) { m.push_back(metadata_entry::make(k, value_type::STRING, v)); };
    auto u32 = [&](const char* k, std::uint64_t v) { m.push_back(metadata_entry::make(k, value_type::UINT32, v)); };
    auto f32 = [&](const char* k, double v) { m.push_back(metadata_entry::make(k, value_type::FLOAT32, v)); };
    str("general.architecture", "llama");
    str("general.type", "model");
    str("general.name", "Tiny Llama Test 150k");
    str("general.basename", "tiny-llama");
    str("general.size_label", "1B");
    str("general.license", "apache-2.0");
    u32("llama.block_count", 16);
    u32("llama.context_length", 131072);
    u32("llama.embedding_length", 2048);
    u32("llama.feed_forward_length", 8192);
    u32("llama.attention.head_count", 32);
    u32("llama.attention.head_count_kv", 8);
    f32("llama.rope.freq_base", 500000.0);
    f32("llama.attention.layer_norm_rms_epsilon", 1e-5);
    u32("llama.attention.key_length", 64);
    u32("llama.attention.value_length", 64);
    u32("general.file_type", 15);  // MOSTLY_Q4_K_M
    u32("llama.vocab_size", vocab);
    u32("llama.rope.dimension_count", 64);
    str("tokenizer.ggml.model", "gpt2");
    str("tokenizer.ggml.pre", "llama-bpe");
    lcg r{42};
    std::vector<std::string> tokens;
    tokens.reserve(vocab);
    for (std::size_t i = 0; i < vocab; ++i) {
        if (i < 256) tokens.push_back("<0x" + std::string{"0123456789ABCDEF"[i >> 4], "0123456789ABCDEF"[i & 15]} + ">");
        else tokens.push_back((r.next() % 10 < 6 ? "\xc4\xa0" : "") + word(r));
    }
    std::vector<gguf::scalar> v(tokens.begin(), tokens.end());
    m.push_back(metadata_entry::make_array("tokenizer.ggml.tokens", value_type::STRING, v));
    std::vector<gguf::scalar> types(vocab, std::int64_t{1});
    m.push_back(metadata_entry::make_array("tokenizer.ggml.token_type", value_type::INT32, types));
    std::vector<std::string> pairs;
    pairs.reserve(merges);
    for (std::size_t i = 0; i < merges; ++i)
        pairs.push_back((r.next() % 10 < 5 ? "\xc4\xa0" : "") + word(r) + " " + word(r));
    std::vector<gguf::scalar> mv(pairs.begin(), pairs.end());
    m.push_back(metadata_entry::make_array("tokenizer.ggml.merges", value_type::STRING, mv));
    u32("tokenizer.ggml.bos_token_id", 128000);
    u32("tokenizer.ggml.eos_token_id", 128009);
    m.push_back(metadata_entry::make("tokenizer.ggml.add_bos_token", value_type::BOOL, true));
    std::string tmpl;
    while (tmpl.size() < 2000) tmpl += "{% for message in messages %}<|start_header_id|>{{ message['role'] }}";
    str("tokenizer.chat_template", tmpl);
    u32("general.quantization_version", 2);
    return m;
}

std::vector<gguf::tensor_record> llama_tensors(std::size_t layers, std::uint64_t width, std::uint64_t vocab) {
    std::vector<gguf::tensor_record> t;
    t.push_back({"token_embd.weight", ggml_type::Q4_K, {width, vocab}});
    for (std::size_t l = 0; l < layers; ++l) {
        const std::string b = "blk." + std::to_string(l) + ".";
        t.push_back({b + "attn_norm.weight", ggml_type::F32, {width}});
        t.push_back({b + "attn_q.weight", ggml_type::Q4_K, {width, width}});
        t.push_back({b + "attn_k.weight", ggml_type::Q4_K, {width, width / 4}});
        t.push_back({b + "attn_v.weight", ggml_type::Q6_K, {width, width / 4}});
        t.push_back({b + "attn_output.weight", ggml_type::Q4_K, {width, width}});
        t.push_back({b + "ffn_norm.weight", ggml_type::F32, {width}});
        t.push_back({b + "ffn_gate.weight", ggml_type::Q4_K, {width, 4 * width}});
        t.push_back({b + "ffn_up.weight", ggml_type::Q4_K, {width, 4 * width}});
        t.push_back({b + "ffn_down.weight", ggml_type::Q6_K, {4 * width, width}});
    }
    t.push_back({"output_norm.weight", ggml_type::F32, {width}});
    t.push_back({"output.weight", ggml_type::Q6_K, {width, vocab}});
    return t;
}

std::uint64_t write_gguf_header_only(const std::filesystem::path& path, const std::vector<metadata_entry>& metadata,
                                     const std::vector<gguf::tensor_record>& tensors) {
    const std::string head = gguf::serialize(metadata, tensors);
    std::uint64_t data = 0;
    for (auto& t : tensors) data += padded(tensor_size(t), gguf::default_alignment);
    write_file(path, head);
    if (::truncate(path.c_str(), static_cast<off_t>(head.size() + data)) != 0)
        throw std::runtime_error("truncate " + path.string() + ": " + std::strerror(errno));
    return head.size();
}

}  // namespace ringsafe::test
