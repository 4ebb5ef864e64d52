// ASCII case and blanks of protocol text (ascii_case.hpp).
#include "http/ascii_case.hpp"

#include <algorithm>
#include <cctype>

namespace ringsafe::http {
namespace {

char lower_char(char c) noexcept { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

}  // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower_char(x) == lower_char(y); });
}

bool starts_with_icase(std::string_view s, std::string_view prefix) noexcept {
    return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

std::string lower(std::string_view s) {
    std::string r(s);
    std::transform(r.begin(), r.end(), r.begin(), lower_char);
    return r;
}

std::string trim(std::string_view s) {
    const auto a = s.find_first_not_of(" \t");
    if (a == std::string_view::npos) return "";
    return std::string(s.substr(a, s.find_last_not_of(" \t") - a + 1));
}

std::string printable(std::string_view s) {
    static constexpr char hex[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) {
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
        } else {
            out += "\\x";
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

}  // namespace ringsafe::http
