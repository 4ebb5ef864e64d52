// JSON (Boost.JSON escaping, so any UTF-8 name is escaped correctly) and table
// output of a listing.
#include "tensor_listing.hpp"

#include <boost/json.hpp>

#include <algorithm>

#include "args.hpp"
#include "terminal_text.hpp"

namespace ringsafe::cli {
namespace {

namespace json = boost::json;

std::string hex(const sha256_digest& md) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out(2 * md.size(), '0');
    for (std::size_t i = 0; i < md.size(); ++i) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    return out;
}

// Output gathered into blocks of about 64 KiB.
class block_writer {
public:
    explicit block_writer(std::FILE* out) : out_(out) {}
    ~block_writer() { flush(); }
    std::string& text() noexcept { return buf_; }
    void maybe_flush() {
        if (buf_.size() >= (64u << 10)) flush();
    }
    void flush() {
        if (!buf_.empty()) std::fwrite(buf_.data(), 1, buf_.size(), out_);
        buf_.clear();
    }

private:
    std::FILE* out_;
    std::string buf_;
};

}  // namespace

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
    w.text() = "{\"ok\":true,\"tensors\":[";
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
        if (sha256) s += ",\"sha256\":\"" + hex(sha256->next()) + '"';
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

void print_listing_table(std::FILE* out, const listing& l, digest_store* sha256) {
    if (sha256) sha256->rewind();
    // Column widths first, then each row formatted as it is printed.
    std::size_t name_w = 4, shape_w = 5;
    for (auto& t : l.tensors) {
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
    row("NAME", "DTYPE", "SHAPE", "SIZE", sha256 ? "SHA256" : "");
    for (std::size_t i = 0; i < l.tensors.size(); ++i) {
        const tensor_info& t = l.tensors[i];
        row(terminal_text(t.name), dtype_name(t.dtype), shape_text(t.shape), human_bytes(t.size()),
            sha256 ? hex(sha256->next()) : std::string());
    }
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
