// fnmatch-style glob matching over UTF-8 code points (see selection.hpp).
#include <cstdint>
#include <optional>
#include <string_view>

#include "ringsafe/selection.hpp"

namespace ringsafe {
namespace {

// A byte that does not start a valid UTF-8 sequence stands for itself, moved
// past the code point range so it never equals a real character.
constexpr std::uint32_t invalid_base = 0x110000;

// Decodes the character at s[i] and advances i past it.
std::uint32_t next_char(std::string_view s, std::size_t& i) {
    auto b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 1) return ++i, b;
    if (len == 0 || i + len > s.size()) return ++i, invalid_base + b;
    std::uint32_t cp = b & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
        auto c = static_cast<unsigned char>(s[i + k]);
        if ((c >> 6) != 2) return ++i, invalid_base + b;
        cp = cp << 6 | (c & 0x3F);
    }
    i += len;
    return cp;
}

// Matches `c` against the bracket expression starting at p[pi] == '['. Returns
// nullopt when the bracket is not closed (then '[' is literal); otherwise
// whether it matched, with `next` set past the closing ']'.
std::optional<bool> match_bracket(std::string_view p, std::size_t pi, std::uint32_t c,
                                  std::size_t& next) {
    std::size_t j = pi + 1;
    bool negate = j < p.size() && (p[j] == '!' || p[j] == '^');
    if (negate) ++j;
    bool matched = false, first = true;
    for (;;) {
        if (j >= p.size()) return std::nullopt;
        if (p[j] == ']' && !first) break;
        first = false;
        if (p[j] == '\\' && j + 1 < p.size()) ++j;
        std::uint32_t lo = next_char(p, j), hi = lo;
        if (j + 1 < p.size() && p[j] == '-' && p[j + 1] != ']') {
            ++j;
            if (p[j] == '\\' && j + 1 < p.size()) ++j;
            hi = next_char(p, j);
        }
        if (lo <= c && c <= hi) matched = true;
    }
    next = j + 1;
    return matched != negate;
}

}  // namespace

bool glob_match(std::string_view p, std::string_view name) noexcept {
    constexpr std::size_t none = std::string_view::npos;
    std::size_t pi = 0, ni = 0, star_pi = none, star_ni = 0;
    while (ni < name.size()) {
        if (pi < p.size()) {
            if (p[pi] == '*') {
                while (pi < p.size() && p[pi] == '*') ++pi;
                star_pi = pi, star_ni = ni;
                continue;
            }
            std::size_t n2 = ni;
            std::uint32_t c = next_char(name, n2);
            if (p[pi] == '?') {
                ++pi;
                ni = n2;
                continue;
            }
            bool ok = false;
            std::size_t p2 = pi;
            std::optional<bool> br;
            if (p[pi] == '[' && (br = match_bracket(p, pi, c, p2))) {
                ok = *br;
            } else {
                p2 = pi;
                if (p[p2] == '\\' && p2 + 1 < p.size()) ++p2;
                ok = next_char(p, p2) == c;
            }
            if (ok) {
                pi = p2;
                ni = n2;
                continue;
            }
        }
        if (star_pi == none) return false;
        // Let the last '*' swallow one more character and retry after it.
        next_char(name, star_ni);
        ni = star_ni;
        pi = star_pi;
    }
    while (pi < p.size() && p[pi] == '*') ++pi;
    return pi == p.size();
}

bool is_glob(std::string_view pattern) noexcept {
    return pattern.find_first_of("*?[\\") != std::string_view::npos;
}

}  // namespace ringsafe
