// JSON (Boost.JSON escaping, so any UTF-8 name is escaped correctly) and table
// output of a listing.
#include "tensor_listing.hpp"

#include <boost/json.hpp>

#include <algorithm>

#include "args.hpp"
#include "json_text.hpp"
#include "terminal_text.hpp"

namespace ringsafe::cli {
namespace json = boost::json;

std::string shape_text(std::span<const std::uint64_t> shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

void print_listing_json(std::FILE* out, const listing& l, digest_store* sha256) {
    if (sha256) sha256->rewind();
    block_writer w(out);
    w.text() = "{\"ok\":true,\"format\":\"safetensors\",\"tensors\":[";
    for (std::size_t i = 0; i < l.tensors.size(); ++i) {
        const tensor_info& t = l.tensors[i];
        std::string& s = w.text();
        if (i) s += ',';
        s += "{\"name\":";
        s += json::serialize(json::string_view(t.name));
        s += ",\"dtype\":\"";
        s += dtype_name(t.dtype);
        s += "\",\"shape\":";
        s += shape_text(t.shape);
        s += ",\"data_offsets\":[" + std::to_string(t.begin) + ',' + std::to_string(t.end) + ']';
        if (sha256) s += ",\"sha256\":\"" + hex_digest(sha256->next()) + '"';
        s += '}';
        w.maybe_flush();
    }
    w.text() += "],\"metadata\":";
    if (*l.metadata) {
        json::object m;
        for (auto& [k, v] : **l.metadata) m.emplace(k, v);
        w.text() += json::serialize(m);
    } else {
        w.text() += "null";
    }
    w.text() += "}\n";
}

std::string type_text(const tensor_info& t) {
    return std::string(t.ggml == ggml_type::none ? dtype_name(t.dtype) : ggml_type_name(t.ggml));
}

void print_tensor_rows(std::FILE* out, std::span<const tensor_info> tensors, digest_store* sha256) {
    if (sha256) sha256->rewind();
    // Column widths first, then each row formatted as it is printed.
    std::size_t name_w = 4, shape_w = 5;
    for (auto& t : tensors) {
        name_w = std::max(name_w, terminal_text(t.name).size());
        shape_w = std::max(shape_w, shape_text(t.shape).size());
    }
    name_w = std::min<std::size_t>(name_w, 80);
    auto row = [&](std::string_view name, std::string_view dtype, std::string_view shape, std::string_view size,
                   std::string_view digest) {
        std::fprintf(out, "%-*.*s  %-11.*s  %-*.*s  %12.*s%s%.*s\n", static_cast<int>(name_w),
                     static_cast<int>(name.size()), name.data(), static_cast<int>(dtype.size()), dtype.data(),
                     static_cast<int>(shape_w), static_cast<int>(shape.size()), shape.data(),
                     static_cast<int>(size.size()), size.data(), digest.empty() ? "" : "  ",
                     static_cast<int>(digest.size()), digest.data());
    };
    const bool gguf = !tensors.empty() && tensors.front().ggml != ggml_type::none;
    row("NAME", gguf ? "TYPE" : "DTYPE", "SHAPE", "SIZE", sha256 ? "SHA256" : "");
    for (const tensor_info& t : tensors)
        row(terminal_text(t.name), type_text(t), shape_text(t.shape), human_bytes(t.size()),
            sha256 ? hex_digest(sha256->next()) : std::string());
}

void print_listing_table(std::FILE* out, const listing& l, digest_store* sha256) {
    print_tensor_rows(out, l.tensors, sha256);
    const auto& meta = *l.metadata;
    if (meta)
        for (auto& [k, v] : *meta)
            std::fprintf(out, "metadata %s = %s\n", terminal_text(k).c_str(), terminal_text(v).c_str());
    std::fprintf(out, "%zu tensors, %s of data (%llu bytes), %llu-byte header, %s%s\n", l.tensors.size(),
                 human_bytes(l.data_size).c_str(), static_cast<unsigned long long>(l.data_size),
                 static_cast<unsigned long long>(l.header_size),
                 meta ? (std::to_string(meta->size()) + " metadata entries").c_str() : "no metadata",
                 sha256 ? "; every tensor's bytes read and hashed" : "");
}

}  // namespace ringsafe::cli
