// Header serialization, byte-compatible with the reference writer
// (serde_json compact output, padded with spaces).
#include <charconv>
#include <string>

#include "ringsafe/header.hpp"

namespace ringsafe {
namespace {

// serde_json's escapes: \" \\ \b \t \n \f \r, other controls as \u00xx (lowercase hex).
char short_escape(unsigned char c) noexcept {
    switch (c) {
        case '"': return '"';
        case '\\': return '\\';
        case '\b': return 'b';
        case '\t': return 't';
        case '\n': return 'n';
        case '\f': return 'f';
        case '\r': return 'r';
        default: return 0;
    }
}

std::size_t quoted_size(std::string_view s) noexcept {
    std::size_t n = 2;
    for (unsigned char c : s) n += c >= 0x20 && c != '"' && c != '\\' ? 1 : short_escape(c) ? 2 : 6;
    return n;
}

std::size_t number_size(std::uint64_t v) noexcept {
    std::size_t n = 1;
    while (v >= 10) v /= 10, ++n;
    return n;
}

// Writes into a buffer sized by serialized_json_size().
class json_writer {
public:
    explicit json_writer(char* p) : p_(p) {}
    char* pos() const { return p_; }
    void raw(std::string_view s) {
        for (char c : s) *p_++ = c;
    }
    void ch(char c) { *p_++ = c; }
    void number(std::uint64_t v) { p_ = std::to_chars(p_, p_ + 20, v).ptr; }
    void quoted(std::string_view s) {
        static constexpr char hex[] = "0123456789abcdef";
        *p_++ = '"';
        for (unsigned char c : s) {
            if (c >= 0x20 && c != '"' && c != '\\') {
                *p_++ = static_cast<char>(c);
            } else if (char e = short_escape(c)) {
                *p_++ = '\\', *p_++ = e;
            } else {
                raw("\\u00");
                *p_++ = hex[c >> 4], *p_++ = hex[c & 15];
            }
        }
        *p_++ = '"';
    }

private:
    char* p_;
};

constexpr std::string_view k_dtype = "{\"dtype\":", k_shape = ",\"shape\":[", k_offsets = "],\"data_offsets\":[";

}  // namespace

std::uint64_t serialized_json_size(std::span<const tensor_entry> tensors, const metadata_map* metadata) {
    std::uint64_t n = 2;  // {}
    std::size_t items = tensors.size() + (metadata ? 1 : 0);
    if (items) n += items - 1;  // commas between top-level entries
    if (metadata) {
        n += quoted_size("__metadata__") + 1 + 2;  // key, colon, braces
        if (!metadata->empty()) n += metadata->size() - 1;
        for (auto& [k, v] : *metadata) n += quoted_size(k) + 1 + quoted_size(v);
    }
    for (const tensor_entry& t : tensors) {
        n += quoted_size(t.name) + 1 + k_dtype.size() + quoted_size(dtype_name(t.dtype)) + k_shape.size() +
             k_offsets.size() + 2;  // "]}" after the offsets
        for (std::size_t i = 0; i < t.shape.size(); ++i) n += number_size(t.shape[i]) + (i ? 1 : 0);
        n += number_size(t.begin) + 1 + number_size(t.end);
    }
    return n;
}

std::string serialize_header(std::span<const tensor_entry> tensors, const metadata_map* metadata,
                             const serialize_options& opts) {
    const std::uint64_t json_size = serialized_json_size(tensors, metadata);
    std::uint64_t total = (json_size + 7) / 8 * 8;
    if (opts.pad_to != 0) {
        if (json_size > opts.pad_to)
            raise(errc::ReservationExceeded, "the header JSON is " + std::to_string(json_size) +
                                                 " bytes, more than the " + std::to_string(opts.pad_to) +
                                                 " bytes reserved for it");
        total = opts.pad_to;
    }
    std::string out(static_cast<std::size_t>(total), ' ');
    json_writer w(out.data());
    w.ch('{');
    bool first = true;
    if (metadata) {
        w.quoted("__metadata__");
        w.raw(":{");
        bool first_kv = true;
        for (auto& [k, v] : *metadata) {
            if (!first_kv) w.ch(',');
            first_kv = false;
            w.quoted(k);
            w.ch(':');
            w.quoted(v);
        }
        w.ch('}');
        first = false;
    }
    for (const tensor_entry& t : tensors) {
        if (!first) w.ch(',');
        first = false;
        w.quoted(t.name);
        w.ch(':');
        w.raw(k_dtype);
        w.quoted(dtype_name(t.dtype));
        w.raw(k_shape);
        for (std::size_t i = 0; i < t.shape.size(); ++i) {
            if (i) w.ch(',');
            w.number(t.shape[i]);
        }
        w.raw(k_offsets);
        w.number(t.begin);
        w.ch(',');
        w.number(t.end);
        w.raw("]}");
    }
    w.ch('}');
    return out;
}

bool reference_writer_order(const tensor_entry& a, const tensor_entry& b) noexcept {
    if (a.dtype != b.dtype) return a.dtype > b.dtype;
    return a.name < b.name;
}

}  // namespace ringsafe
