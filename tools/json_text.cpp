// JSON strings of arbitrary bytes, doubles in shortest round-trip form.
#include "json_text.hpp"

#include <boost/json.hpp>

#include <charconv>
#include <cmath>

#include "terminal_text.hpp"

namespace ringsafe::cli {

void append_json_string(std::string& out, std::string_view text) {
    std::string fixed;
    bool valid = true;
    for (std::size_t i = 0; i < text.size();) {
        char32_t cp = 0;
        const std::size_t n = static_cast<unsigned char>(text[i]) < 0x80 ? 1 : utf8_sequence(text, i, cp);
        if (n == 0) {
            if (valid) fixed.assign(text.substr(0, i)), valid = false;
            fixed += "\xef\xbf\xbd";  // U+FFFD
            ++i;
            continue;
        }
        if (!valid) fixed.append(text.substr(i, n));
        i += n;
    }
    out += boost::json::serialize(boost::json::string_view(valid ? text : std::string_view(fixed)));
}

void append_json_number(std::string& out, double v) {
    if (std::isnan(v)) return void(out += "\"NaN\"");
    if (std::isinf(v)) return void(out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
}

}  // namespace ringsafe::cli
