// The K-quants: super-blocks of 256 elements with an fp16 scale (and minimum)
// and 16 or 8 sub-block scales (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K), and Q8_K (a
// float32 scale). Layouts as ggml's block_q*_K structs; products rounded to
// float32 in ggml's order (d x sub-scale, then x value, then - minimum).
#include "dequant/block_bits.hpp"

namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA {
namespace {

// block_q2_K: scales[16] (low nibble: scale, high: minimum), qs[64], d, dmin.
// Element 128h + 32s + l is bits 2s of qs[32h + l]; its sub-block is /16.
template <class S>
void q2_k(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 84, y += 256) {
        const std::uint8_t* sc = b;
        const std::uint8_t* qs = b + 16;
        const float d = load_half(b + 80);
        const float dmin = load_half(b + 82);
        for (int g = 0; g < 16; ++g) {
            const float dl = d * float(sc[g] & 0xf);
            const float ml = dmin * float(sc[g] >> 4);
            const std::uint8_t* q = qs + 32 * (g / 8) + 16 * (g % 2);
            const int shift = 2 * ((g % 8) / 2);
            auto* out = y + 16 * g;
            for (int l = 0; l < 16; ++l) out[l] = S::from(dl * float((q[l] >> shift) & 3) - ml);
        }
    }
}

// block_q3_K: hmask[32], qs[64], scales[12] (16 six-bit scales), d. Low bits as
// Q2_K; element 32k + l takes bit k of hmask[l], and a clear bit subtracts 4.
template <class S>
void q3_k(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 110, y += 256) {
        const std::uint8_t* hm = b;
        const std::uint8_t* qs = b + 32;
        const std::uint8_t* s = b + 96;
        const float d = load_half(b + 108);
        for (int g = 0; g < 16; ++g) {
            const int lo = g < 8 ? s[g] & 0xf : s[g - 8] >> 4;
            const int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
            const float dl = d * float((lo | hi << 4) - 32);
            const std::uint8_t* q = qs + 32 * (g / 8) + 16 * (g % 2);
            const int shift = 2 * ((g % 8) / 2);
            const std::uint8_t* h = hm + 16 * (g % 2);
            const int hbit = g / 2;
            auto* out = y + 16 * g;
            for (int l = 0; l < 16; ++l) {
                const int v = ((q[l] >> shift) & 3) - (((h[l] >> hbit) & 1) ? 0 : 4);
                out[l] = S::from(dl * float(v));
            }
        }
    }
}

// The eight six-bit scales and minimums of Q4_K/Q5_K, packed in 12 bytes.
struct k_scale_min {
    std::uint8_t sc[8];
    std::uint8_t m[8];
};
inline k_scale_min unpack_k_scales(const std::uint8_t* s) noexcept {
    k_scale_min r;
    for (int j = 0; j < 4; ++j) {
        r.sc[j] = s[j] & 0x3f;
        r.m[j] = s[j + 4] & 0x3f;
        r.sc[j + 4] = (s[j + 8] & 0xf) | ((s[j] >> 2) & 0x30);
        r.m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 2) & 0x30);
    }
    return r;
}

// block_q4_K: d, dmin, scales[12], qs[128]. Element 64c + l (l < 32) is the low
// nibble of qs[32c + l], 64c + 32 + l its high nibble; sub-block = element / 32.
// block_q5_K (FifthBit): d, dmin, scales[12], qh[32], qs[128]: the same nibbles,
// and element 32k + l takes bit k of qh[l] as its fifth bit.
template <class S, bool FifthBit>
void q45_k(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    constexpr std::size_t block_bytes = FifthBit ? 176 : 144;
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += block_bytes, y += 256) {
        const float d = load_half(b);
        const float dmin = load_half(b + 2);
        const k_scale_min s = unpack_k_scales(b + 4);
        const std::uint8_t* qh = b + 16;
        const std::uint8_t* qs = b + (FifthBit ? 48 : 16);
        for (int c = 0; c < 4; ++c) {
            const float d1 = d * float(s.sc[2 * c]), m1 = dmin * float(s.m[2 * c]);
            const float d2 = d * float(s.sc[2 * c + 1]), m2 = dmin * float(s.m[2 * c + 1]);
            const std::uint8_t* q = qs + 32 * c;
            auto* out = y + 64 * c;
            for (int l = 0; l < 32; ++l) {
                unsigned lo = q[l] & 0xfu, hi = q[l] >> 4;
                if constexpr (FifthBit) {
                    lo |= ((qh[l] >> (2 * c)) & 1u) << 4;
                    hi |= ((qh[l] >> (2 * c + 1)) & 1u) << 4;
                }
                out[l] = S::from(d1 * float(lo) - m1);
                out[l + 32] = S::from(d2 * float(hi) - m2);
            }
        }
    }
}
template <class S>
void q4_k(const std::uint8_t* __restrict b, std::size_t n, void* out) noexcept {
    q45_k<S, false>(b, n, out);
}
template <class S>
void q5_k(const std::uint8_t* __restrict b, std::size_t n, void* out) noexcept {
    q45_k<S, true>(b, n, out);
}

// block_q6_K: ql[128], qh[64], scales[16] (int8), d. In each half h of 128:
// element 32s + l takes nibble s/2 of ql[64h + 32(s%2) + l] and bits 2s of
// qh[32h + l]; value - 32; sub-block = element / 16. Each run of 16 elements
// with one scale is its own loop, so that the compiler vectorizes it.
template <class S>
void q6_k(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 210, y += 256) {
        const float d = load_half(b + 208);
        for (int h = 0; h < 2; ++h) {
            for (int s = 0; s < 4; ++s) {
                const std::uint8_t* ql = b + 64 * h + 32 * (s % 2);
                const std::uint8_t* qh = b + 128 + 32 * h;
                const int lshift = 4 * (s / 2), hshift = 2 * s;
                for (int r = 0; r < 2; ++r) {
                    const float ds = d * float(static_cast<std::int8_t>(b[192 + 8 * h + 2 * s + r]));
                    auto* out = y + 128 * h + 32 * s + 16 * r;
                    for (int l = 0; l < 16; ++l) {
                        const int q = int(((ql[16 * r + l] >> lshift) & 0xf) | ((qh[16 * r + l] >> hshift) & 3) << 4);
                        out[l] = S::from(ds * float(q - 32));
                    }
                }
            }
        }
    }
}

// block_q8_K: d (float32), qs[256] (int8), bsums[16] (unused here).
template <class S>
void q8_k(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 292, y += 256) {
        const float d = float_from_bits(load_u32(b));
        const std::uint8_t* qs = b + 4;
        for (int j = 0; j < 256; ++j) y[j] = S::from(d * float(static_cast<std::int8_t>(qs[j])));
    }
}

}  // namespace

void add_k_quants(kernel_table& t) noexcept {
    RINGSAFE_DEQUANT_SET(t, Q2_K, q2_k);
    RINGSAFE_DEQUANT_SET(t, Q3_K, q3_k);
    RINGSAFE_DEQUANT_SET(t, Q4_K, q4_k);
    RINGSAFE_DEQUANT_SET(t, Q5_K, q5_k);
    RINGSAFE_DEQUANT_SET(t, Q6_K, q6_k);
    RINGSAFE_DEQUANT_SET(t, Q8_K, q8_k);
}

}  // namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA
