// `ls` / `verify` of a GGUF checkpoint: JSON in file order, a table for people.
#include "gguf_listing.hpp"

#include <array>
#include <map>

#include "args.hpp"
#include "json_text.hpp"
#include "tensor_listing.hpp"
#include "terminal_text.hpp"

namespace ringsafe::cli {
namespace {

using gguf::metadata_entry;
using gguf::value_type;

void append_dims(std::string& s, std::span<const std::uint64_t> d) { s += shape_text(d); }

void append_element(std::string& s, const metadata_entry& e, std::uint64_t i) {
    const gguf::scalar v = e.value(i);
    if (auto* u = std::get_if<std::uint64_t>(&v)) s += std::to_string(*u);
    else if (auto* n = std::get_if<std::int64_t>(&v)) s += std::to_string(*n);
    else if (auto* d = std::get_if<double>(&v)) append_json_number(s, *d);
    else if (auto* b = std::get_if<bool>(&v)) s += *b ? "true" : "false";
    else append_json_string(s, std::get<std::string_view>(v));
}

void append_entry(block_writer& w, const metadata_entry& e) {
    std::string& s = w.text();
    s += "{\"key\":";
    append_json_string(s, e.key);
    s += ",\"type\":\"";
    s += gguf::value_type_name(e.type);
    if (!e.is_array()) {
        s += "\",\"value\":";
        append_element(s, e, 0);
        s += '}';
        return;
    }
    s += "\",\"element_type\":\"";
    s += gguf::value_type_name(e.element_type);
    s += "\",\"value\":[";
    for (std::uint64_t i = 0; i < e.count; ++i) {
        if (i) s += ',';
        append_element(s, e, i);
        w.maybe_flush();
    }
    w.text() += "]}";
}

// The split keys of a single file, or of a set with its parts; nullopt without them.
std::optional<gguf::split_info> split_of(const gguf::header& h) {
    try {
        return h.split();
    } catch (const error&) {
        return std::nullopt;  // broken split keys of a file opened alone: its metadata shows them
    }
}

// llama.cpp's file types (gguf-py's LlamaFileType), by general.file_type.
std::string file_type_name(std::int64_t v) {
    static const std::map<std::int64_t, std::string_view> names{
        {0, "ALL_F32"},        {1, "MOSTLY_F16"},     {2, "MOSTLY_Q4_0"},    {3, "MOSTLY_Q4_1"},
        {7, "MOSTLY_Q8_0"},    {8, "MOSTLY_Q5_0"},    {9, "MOSTLY_Q5_1"},    {10, "MOSTLY_Q2_K"},
        {11, "MOSTLY_Q3_K_S"}, {12, "MOSTLY_Q3_K_M"}, {13, "MOSTLY_Q3_K_L"}, {14, "MOSTLY_Q4_K_S"},
        {15, "MOSTLY_Q4_K_M"}, {16, "MOSTLY_Q5_K_S"}, {17, "MOSTLY_Q5_K_M"}, {18, "MOSTLY_Q6_K"},
        {19, "MOSTLY_IQ2_XXS"}, {20, "MOSTLY_IQ2_XS"}, {21, "MOSTLY_Q2_K_S"}, {22, "MOSTLY_IQ3_XS"},
        {23, "MOSTLY_IQ3_XXS"}, {24, "MOSTLY_IQ1_S"}, {25, "MOSTLY_IQ4_NL"}, {26, "MOSTLY_IQ3_S"},
        {27, "MOSTLY_IQ3_M"},  {28, "MOSTLY_IQ2_S"},  {29, "MOSTLY_IQ2_M"},  {30, "MOSTLY_IQ4_XS"},
        {31, "MOSTLY_IQ1_M"},  {32, "MOSTLY_BF16"},   {36, "MOSTLY_TQ1_0"},  {37, "MOSTLY_TQ2_0"},
        {38, "MOSTLY_MXFP4_MOE"}, {39, "MOSTLY_NVFP4"}, {40, "MOSTLY_Q1_0"}, {1024, "GUESSED"},
    };
    auto it = names.find(v);
    return it == names.end() ? "file type " + std::to_string(v) : std::string(it->second);
}

std::string count_text(std::uint64_t n) {
    static constexpr std::array<const char*, 5> units{"", " K", " M", " B", " T"};
    double v = static_cast<double>(n);
    std::size_t u = 0;
    while (v >= 1000 && u + 1 < units.size()) v /= 1000, ++u;
    char buf[64];
    std::snprintf(buf, sizeof buf, u ? "%.2f%s" : "%.0f%s", v, units[u]);
    return buf;
}

// At most `n` bytes of `s`, cut where a UTF-8 sequence starts.
std::string_view clip(std::string_view s, std::size_t n) {
    if (n >= s.size()) return s;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return s.substr(0, n);
}

// One element for people: strings quoted, terminal-safe, the longest clipped.
std::string element_text(const metadata_entry& e, std::uint64_t i, std::size_t width) {
    if (e.element_type == value_type::STRING) {
        const std::string_view v = e.string_at(i);
        const std::string_view shown = clip(v, width);
        std::string out(1, '"');
        out += terminal_text(shown);
        out += '"';
        if (shown.size() < v.size()) out += "... (" + std::to_string(v.size()) + " bytes)";
        return out;
    }
    std::string s;
    append_element(s, e, i);
    return s;
}

// A value for people: arrays as their first elements and how many there are.
std::string value_text(const metadata_entry& e, std::size_t width = 100) {
    if (!e.is_array()) return element_text(e, 0, 2 * width);
    std::string s = "[";
    std::uint64_t shown = 0;
    for (; shown < e.count && s.size() < width; ++shown) s += (shown ? ", " : "") + element_text(e, shown, width);
    if (shown < e.count) s += ", ... " + std::to_string(e.count - shown) + " more";
    return s + "]";
}

std::string entry_type(const metadata_entry& e) {
    if (!e.is_array()) return std::string(gguf::value_type_name(e.type));
    return "ARRAY of " + std::to_string(e.count) + " " + std::string(gguf::value_type_name(e.element_type));
}

}  // namespace

void print_gguf_json(std::FILE* out, const reader& r, digest_store* sha256) {
    if (sha256) sha256->rewind();
    const gguf::header& h = *r.gguf();
    const auto shards = r.shards();
    block_writer w(out);
    std::string& s = w.text();
    s = "{\"ok\":true,\"format\":\"gguf\",\"version\":" + std::to_string(h.version) +
        ",\"alignment\":" + std::to_string(h.alignment) + ",\"data_offset\":" + std::to_string(h.data_offset) +
        ",\"metadata\":[";
    for (std::size_t i = 0; i < h.metadata.size(); ++i) {
        if (i) w.text() += ',';
        append_entry(w, h.metadata[i]);
        w.maybe_flush();
    }
    w.text() += "],\"tensors\":[";
    const auto tensors = r.tensors();
    for (std::uint32_t i = 0; i < tensors.size(); ++i) {
        const tensor_info& t = tensors[i];
        std::string& x = w.text();
        x += i ? ",{\"name\":" : "{\"name\":";
        append_json_string(x, t.name);
        x += ",\"type\":\"" + std::string(ggml_type_name(t.ggml)) + "\",\"shape\":";
        append_dims(x, t.shape);
        x += ",\"ne\":";
        append_dims(x, gguf::ne_of(t));
        x += ",\"offset\":" + std::to_string(t.begin) + ",\"nbytes\":" + std::to_string(t.size());
        if (sha256) x += ",\"sha256\":\"" + hex_digest(sha256->next()) + '"';
        if (shards.size() > 1) {
            const auto split = split_of(*shards[r.shard_of(i)].gguf);
            x += ",\"split\":" + std::to_string(split ? split->no : r.shard_of(i));
        }
        x += '}';
        w.maybe_flush();
    }
    std::string& e = w.text();
    e += "],\"split\":";
    const auto split = split_of(h);
    if (!split) {
        e += "null}\n";
        return;
    }
    e += "{\"no\":" + std::to_string(split->no) + ",\"count\":" + std::to_string(split->count) +
         ",\"tensors_count\":" + std::to_string(split->tensors_count);
    if (shards.size() > 1) {
        e += ",\"parts\":[";
        for (std::size_t k = 0; k < shards.size(); ++k) {
            e += k ? ",{\"spec\":" : "{\"spec\":";
            append_json_string(e, shards[k].spec);
            e += ",\"data_offset\":" + std::to_string(shards[k].data_start) +
                 ",\"tensors\":" + std::to_string(shards[k].tensor_count) + '}';
        }
        e += ']';
    }
    e += "}}\n";
}

void print_gguf_table(std::FILE* out, const reader& r, digest_store* sha256) {
    const gguf::header& h = *r.gguf();
    const auto shards = r.shards();
    auto key = [&](const std::string& k) { return h.find_key(k); };
    auto line = [&](const char* what, const std::string& value) {
        std::fprintf(out, "%-14s %s\n", what, value.c_str());
    };
    std::fprintf(out, "GGUF v%u, alignment %u, data section at byte %llu%s\n", h.version, h.alignment,
                 static_cast<unsigned long long>(h.data_offset),
                 shards.size() > 1 ? (", one model in " + std::to_string(shards.size()) + " split files").c_str() : "");
    // Strings plainly here (terminal-safe), other values as the metadata lines show them.
    auto plain = [&](const metadata_entry& e) {
        const auto s = e.as_string();
        return s ? terminal_text(clip(*s, 200)) : value_text(e);
    };
    const metadata_entry* arch = key("general.architecture");
    const std::string a = arch && arch->as_string() ? std::string(*arch->as_string()) : std::string();
    if (arch) line("architecture", plain(*arch));
    if (const metadata_entry* n = key("general.name")) line("name", plain(*n));
    std::uint64_t params = 0;
    std::map<std::string, std::size_t> types;
    for (const tensor_info& t : r.tensors()) params += t.elements(), ++types[std::string(ggml_type_name(t.ggml))];
    line("parameters", count_text(params) + " (" + std::to_string(params) + ")");
    std::string quant;
    if (const metadata_entry* ft = key("general.file_type"); ft && ft->as_integer())
        quant = file_type_name(*ft->as_integer()) + " (general.file_type " + std::to_string(*ft->as_integer()) + "); ";
    quant += "tensors:";
    for (auto& [t, n] : types) quant += " " + t + " x" + std::to_string(n);
    line("quantization", quant);
    if (const metadata_entry* c = a.empty() ? nullptr : key(a + ".context_length"))
        line("context length", plain(*c));
    print_tensor_rows(out, r.tensors(), sha256);
    for (const metadata_entry& e : h.metadata)
        std::fprintf(out, "metadata %s %s = %s\n", terminal_text(e.key).c_str(), entry_type(e).c_str(),
                     value_text(e).c_str());
    std::uint64_t header = 0;
    for (const shard_info& s : shards) header += s.data_start;
    std::fprintf(out, "%zu tensors, %s of data (%llu bytes), %llu-byte header%s, %zu metadata entries%s\n",
                 r.tensors().size(), human_bytes(r.total_bytes()).c_str(),
                 static_cast<unsigned long long>(r.total_bytes()), static_cast<unsigned long long>(header),
                 shards.size() > 1 ? "s" : "", h.metadata.size(),
                 sha256 ? "; every tensor's bytes read and hashed" : "");
}

}  // namespace ringsafe::cli
