// terminal_text: visible escapes for what a terminal would interpret.
#include "terminal_text.hpp"

#include <cstdint>
#include <string>

#include "ringsafe/error.hpp"

namespace ringsafe::cli {
namespace {

void hex_byte(std::string& out, unsigned char b) {
    static const char* digits = "0123456789abcdef";
    out += "\\x";
    out += digits[b >> 4];
    out += digits[b & 15];
}

// C1 controls and the bidirectional formatting characters (embeddings,
// overrides, isolates, marks), which reorder or hide what follows them.
bool invisible_control(char32_t cp) {
    return (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069) ||
           cp == 0x200E || cp == 0x200F || cp == 0x061C;
}

void code_point_escape(std::string& out, char32_t cp) {
    static const char* digits = "0123456789abcdef";
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += digits[(cp >> shift) & 15];
}

}  // namespace

std::size_t utf8_sequence(std::string_view s, std::size_t i, char32_t& cp) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    std::size_t n;
    char32_t min;
    if (b0 >= 0xC2 && b0 <= 0xDF) n = 2, min = 0x80, cp = b0 & 0x1F;
    else if (b0 >= 0xE0 && b0 <= 0xEF) n = 3, min = 0x800, cp = b0 & 0x0F;
    else if (b0 >= 0xF0 && b0 <= 0xF4) n = 4, min = 0x10000, cp = b0 & 0x07;
    else return 0;
    if (s.size() - i < n) return 0;
    for (std::size_t k = 1; k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

std::string terminal_text(std::string_view raw) {
    const std::string shown = without_url_secrets(std::string(raw));
    const std::string_view text = shown;
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto b = static_cast<unsigned char>(text[i]);
        if (b < 0x80) {
            switch (b) {
            case '\\': out += "\\\\"; break;
            case 0x1B: out += "\\e"; break;
            case '\r': out += "\\r"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\0': out += "\\0"; break;
            default:
                if (b < 0x20 || b == 0x7F) hex_byte(out, b);
                else out += static_cast<char>(b);
            }
            ++i;
            continue;
        }
        char32_t cp = 0;
        const std::size_t n = utf8_sequence(text, i, cp);
        if (n == 0) {
            hex_byte(out, b);
            ++i;
        } else {
            if (invisible_control(cp)) code_point_escape(out, cp);
            else out.append(text.substr(i, n));
            i += n;
        }
    }
    return out;
}

}  // namespace ringsafe::cli
