// Strict UTF-8 validation with an ASCII fast path (16 bytes per step).
#include "format/utf8.hpp"

#include <cstdint>
#include <cstring>

namespace ringsafe::format {
namespace {

constexpr std::uint64_t high_bits = 0x8080808080808080ull;

inline std::uint64_t load64(const unsigned char* p) noexcept {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

inline bool is_cont(unsigned char c) noexcept { return (c & 0xC0) == 0x80; }

// Length of the valid sequence starting at p[0] (a non-ASCII lead byte), or 0.
inline std::size_t sequence_length(const unsigned char* p, std::size_t left) noexcept {
    unsigned char c = p[0];
    if (c >= 0xC2 && c <= 0xDF) return left >= 2 && is_cont(p[1]) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3) return 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;          // overlong below U+0800
        else if (c == 0xED) hi = 0x9F;     // surrogates U+D800..U+DFFF
        return p[1] >= lo && p[1] <= hi && is_cont(p[2]) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4) return 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xF0) lo = 0x90;          // overlong below U+10000
        else if (c == 0xF4) hi = 0x8F;     // above U+10FFFF
        return p[1] >= lo && p[1] <= hi && is_cont(p[2]) && is_cont(p[3]) ? 4 : 0;
    }
    return 0;  // continuation byte, C0/C1 (overlong) or F5..FF
}

}  // namespace

std::size_t utf8_invalid_at(std::string_view bytes) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t n = bytes.size();
    std::size_t i = 0;
    while (i < n) {
        // ASCII fast path: skip 16 bytes at a time while no high bit is set.
        while (i + 16 <= n && ((load64(p + i) | load64(p + i + 8)) & high_bits) == 0) i += 16;
        if (i == n) break;
        if (p[i] < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = sequence_length(p + i, n - i);
        if (len == 0) return i;
        i += len;
    }
    return std::string_view::npos;
}

}  // namespace ringsafe::format
