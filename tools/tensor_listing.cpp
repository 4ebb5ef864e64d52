// JSON (Boost.JSON, so any UTF-8 name is escaped correctly) and table output
// of a parsed header.
#include "tensor_listing.hpp"

#include <boost/json.hpp>

#include <algorithm>

#include "args.hpp"
#include "terminal_text.hpp"

namespace ringsafe::cli {

namespace json = boost::json;

std::string shape_text(const std::vector<std::uint64_t>& shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

void print_listing_json(std::FILE* out, const header& h, const std::vector<std::string>& sha256) {
    // Streamed tensor by tensor, so memory stays small for headers of millions of tensors.
    std::string buf = "{\"ok\":true,\"tensors\":[";
    for (std::size_t i = 0; i < h.tensors.size(); ++i) {
        const tensor_info& t = h.tensors[i];
        json::array shape;
        for (std::uint64_t d : t.shape) shape.emplace_back(d);
        json::object o;
        o.emplace("name", t.name);
        o.emplace("dtype", dtype_name(t.dtype));
        o.emplace("shape", std::move(shape));
        o.emplace("data_offsets", json::array{t.begin, t.end});
        if (!sha256.empty()) o.emplace("sha256", sha256[i]);
        if (i) buf += ',';
        buf += json::serialize(o);
        if (buf.size() >= (64u << 10)) std::fwrite(buf.data(), 1, buf.size(), out), buf.clear();
    }
    buf += "],\"metadata\":";
    if (h.metadata) {
        json::object m;
        for (auto& [k, v] : *h.metadata) m.emplace(k, v);
        buf += json::serialize(m);
    } else {
        buf += "null";
    }
    buf += "}\n";
    std::fwrite(buf.data(), 1, buf.size(), out);
}

void print_listing_table(std::FILE* out, const header& h, const std::vector<std::string>& sha256) {
    std::size_t name_w = 4, shape_w = 5;
    std::vector<std::string> shapes;
    shapes.reserve(h.tensors.size());
    std::vector<std::string> names;  // terminal-safe
    names.reserve(h.tensors.size());
    for (auto& t : h.tensors) {
        names.push_back(terminal_text(t.name));
        name_w = std::max(name_w, names.back().size());
        shapes.push_back(shape_text(t.shape));
        shape_w = std::max(shape_w, shapes.back().size());
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
    row("NAME", "DTYPE", "SHAPE", "SIZE", sha256.empty() ? "" : "SHA256");
    for (std::size_t i = 0; i < h.tensors.size(); ++i) {
        const tensor_info& t = h.tensors[i];
        row(names[i], dtype_name(t.dtype), shapes[i], human_bytes(t.size()), sha256.empty() ? "" : sha256[i]);
    }
    if (h.metadata)
        for (auto& [k, v] : *h.metadata)
            std::fprintf(out, "metadata %s = %s\n", terminal_text(k).c_str(), terminal_text(v).c_str());
    std::fprintf(out, "%zu tensors, %s of data (%llu bytes), %llu-byte header, %s%s\n", h.tensors.size(),
                 human_bytes(h.data_size).c_str(), static_cast<unsigned long long>(h.data_size),
                 static_cast<unsigned long long>(h.header_size),
                 h.metadata ? (std::to_string(h.metadata->size()) + " metadata entries").c_str() : "no metadata",
                 sha256.empty() ? "" : "; every tensor's bytes read and hashed");
}

}  // namespace ringsafe::cli
