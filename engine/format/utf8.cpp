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

// Bytes in the sequence a lead byte starts (0: not a lead byte).
inline std::size_t lead_length(unsigned char c) noexcept {
    return c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
}

// Whether p[0..n), fewer bytes than p[0]'s sequence needs, can still become a valid sequence.
inline bool valid_start(const unsigned char* p, std::size_t n) noexcept {
    const unsigned char c = p[0];
    if (lead_length(c) <= n) return false;
    if (n >= 2) {
        unsigned char lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
        else if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
        if (p[1] < lo || p[1] > hi) return false;
    }
    return n < 3 || is_cont(p[2]);
}

}  // namespace

std::uint64_t utf8_stream::feed(std::string_view bytes) noexcept {
    if (bad_ != valid) return bad_;
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t n = bytes.size();
    std::size_t i = 0;
    if (tail_len_) {  // complete the sequence the last piece cut
        const std::size_t need = lead_length(tail_[0]);
        while (tail_len_ < need && i < n) tail_[tail_len_++] = p[i++];
        if (tail_len_ < need) {
            if (!valid_start(tail_, tail_len_)) bad_ = tail_at_;
            pos_ += n;
            return bad_;
        }
        if (sequence_length(tail_, tail_len_) == 0) return bad_ = tail_at_;
        tail_len_ = 0;
    }
    const std::size_t rel = utf8_invalid_at(bytes.substr(i));
    if (rel != std::string_view::npos) {
        const std::size_t at = i + rel;
        if (valid_start(p + at, n - at)) {  // cut by the end of the piece, not invalid (yet)
            tail_len_ = n - at;
            std::memcpy(tail_, p + at, tail_len_);
            tail_at_ = pos_ + at;
        } else {
            return bad_ = pos_ + at;
        }
    }
    pos_ += n;
    return bad_;
}

std::uint64_t utf8_stream::finish() noexcept {
    if (bad_ == valid && tail_len_) bad_ = tail_at_;
    return bad_;
}

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
