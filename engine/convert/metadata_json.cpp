// GGUF metadata values and strings as JSON text (metadata_json.hpp).
#include "convert/metadata_json.hpp"

#include <boost/json.hpp>

#include <charconv>
#include <cmath>

#include "format/utf8.hpp"

namespace ringsafe::convert {
namespace {

void append_number(std::string& out, double v) {
    if (std::isnan(v)) return void(out += "\"NaN\"");
    if (std::isinf(v)) return void(out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

void append_element(std::string& s, const gguf::metadata_entry& e, std::uint64_t i) {
    const gguf::scalar v = e.value(i);
    if (auto* u = std::get_if<std::uint64_t>(&v)) s += std::to_string(*u);
    else if (auto* n = std::get_if<std::int64_t>(&v)) s += std::to_string(*n);
    else if (auto* d = std::get_if<double>(&v)) append_number(s, *d);
    else if (auto* b = std::get_if<bool>(&v)) s += *b ? "true" : "false";
    else append_json_string(s, std::get<std::string_view>(v));
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
    std::size_t bad = format::utf8_invalid_at(text);
    if (bad == std::string_view::npos) {
        out += boost::json::serialize(boost::json::string_view(text));
        return;
    }
    std::string fixed;
    while (bad != std::string_view::npos) {  // the byte at `bad` starts no valid sequence
        fixed.append(text.substr(0, bad));
        fixed += "\xef\xbf\xbd";  // U+FFFD
        text.remove_prefix(bad + 1);
        bad = format::utf8_invalid_at(text);
    }
    fixed.append(text);
    out += boost::json::serialize(boost::json::string_view(fixed));
}

std::string metadata_value_json(const gguf::metadata_entry& e) {
    std::string s;
    if (!e.is_array()) {
        append_element(s, e, 0);
        return s;
    }
    s += '[';
    for (std::uint64_t i = 0; i < e.count; ++i) {
        if (i) s += ',';
        append_element(s, e, i);
    }
    s += ']';
    return s;
}

}  // namespace ringsafe::convert
