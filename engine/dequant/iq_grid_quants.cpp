// The i-quants that look values up in a grid (iq_grids.cpp): IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M, super-blocks of 256 elements with
// an fp16 scale. Layouts as ggml's block_iq* structs; the arithmetic in
// ggml's order (scale x grid value, then the sign: signed_grid).
#include "dequant/block_bits.hpp"
#include "dequant/iq_grids.hpp"

namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA {
namespace {

// ggml's ksigns: 7 sign bits and an eighth that makes their count even.
constexpr std::uint8_t even_signs(unsigned i) noexcept {
    return std::uint8_t(i | (std::popcount(i) % 2 ? 0x80u : 0u));
}

// Grid value `g` signed by bit j of `sign_bits`, times `db`: the same float32
// as ggml's and gguf-py's (db x g) x (+-1) for every db (a NaN keeps its sign,
// as it does there), in one multiplication that vectorizes.
inline float signed_grid(float db, unsigned g, unsigned sign_bits, int j) noexcept {
    return db * float((sign_bits >> j) & 1 ? -int(g) : int(g));
}

// Eight grid values of one row times `db`, signed by bits 0..7 of `signs`.
template <class S>
inline void put_row8(typename S::type* __restrict y, std::uint64_t row, float db, unsigned signs) noexcept {
    for (int j = 0; j < 8; ++j) y[j] = S::from(signed_grid(db, unsigned(row >> (8 * j)) & 0xff, signs, j));
}
template <class S>
inline void put_row4(typename S::type* __restrict y, std::uint32_t row, float db, unsigned signs) noexcept {
    for (int j = 0; j < 4; ++j) y[j] = S::from(signed_grid(db, (row >> (8 * j)) & 0xff, signs, j));
}

// The scale of IQ2_XS/IQ2_S sub-block s: nibble s of the scales bytes.
inline float iq2_sub_scale(float d, const std::uint8_t* scales, int s) noexcept {
    return d * (0.5f + float((scales[s / 2] >> (4 * (s % 2))) & 0xf)) * 0.25f;
}

// block_iq2_xxs: d, then per 32 elements two u32: four grid indices (bytes),
// and four 7-bit sign indices with a 4-bit scale on top.
template <class S>
void iq2_xxs(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 66, y += 256) {
        const float d = load_half(b);
        for (int g = 0; g < 8; ++g) {
            const std::uint32_t idx = load_u32(b + 2 + 8 * g);
            const std::uint32_t aux = load_u32(b + 6 + 8 * g);
            const float db = d * (0.5f + float(aux >> 28)) * 0.25f;
            for (int k = 0; k < 4; ++k)
                put_row8<S>(y + 32 * g + 8 * k, iq2xxs_grid[(idx >> (8 * k)) & 0xff], db,
                         even_signs((aux >> (7 * k)) & 0x7f));
        }
    }
}

// block_iq2_xs: d, 32 u16 (9-bit grid index, 7-bit sign index), 16 nibble scales.
template <class S>
void iq2_xs(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 74, y += 256) {
        const float d = load_half(b);
        const std::uint8_t* scales = b + 66;
        for (int s = 0; s < 16; ++s) {
            const float db = iq2_sub_scale(d, scales, s);
            for (int r = 0; r < 2; ++r) {
                const std::uint16_t q = load_u16(b + 2 + 2 * (2 * s + r));
                put_row8<S>(y + 16 * s + 8 * r, iq2xs_grid[q & 511], db, even_signs(q >> 9));
            }
        }
    }
}

// block_iq2_s: d, qs[32] (grid index low bits), signs[32], qh[8] (2 high bits
// per index), 16 nibble scales.
template <class S>
void iq2_s(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 82, y += 256) {
        const float d = load_half(b);
        const std::uint8_t* qs = b + 2;
        const std::uint8_t* signs = b + 34;
        const std::uint8_t* qh = b + 66;
        const std::uint8_t* scales = b + 74;
        for (int s = 0; s < 16; ++s) {
            const float db = iq2_sub_scale(d, scales, s);
            for (int r = 0; r < 2; ++r) {
                const int k = 2 * s + r;
                const unsigned idx = qs[k] | ((qh[k / 4] >> (2 * (k % 4))) & 3u) << 8;
                put_row8<S>(y + 8 * k, iq2s_grid[idx], db, signs[k]);
            }
        }
    }
}

// block_iq3_xxs: d, qs[64] (grid indices of 4 values), then per 32 elements a
// u32 of four 7-bit sign indices and a 4-bit scale.
template <class S>
void iq3_xxs(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 98, y += 256) {
        const float d = load_half(b);
        const std::uint8_t* qs = b + 2;
        for (int g = 0; g < 8; ++g) {
            const std::uint32_t aux = load_u32(b + 66 + 4 * g);
            const float db = d * (0.5f + float(aux >> 28)) * 0.5f;
            for (int k = 0; k < 4; ++k) {
                const unsigned signs = even_signs((aux >> (7 * k)) & 0x7f);
                auto* out = y + 32 * g + 8 * k;
                put_row4<S>(out, iq3xxs_grid[qs[8 * g + 2 * k]], db, signs);
                put_row4<S>(out + 4, iq3xxs_grid[qs[8 * g + 2 * k + 1]], db, signs >> 4);
            }
        }
    }
}

// block_iq3_s: d, qs[64] (grid index low bits), qh[8] (the ninth bit), signs[32]
// (one bit per element), 8 nibble scales (d x (1 + 2 x scale)).
template <class S>
void iq3_s(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 110, y += 256) {
        const float d = load_half(b);
        const std::uint8_t* qs = b + 2;
        const std::uint8_t* qh = b + 66;
        const std::uint8_t* signs = b + 74;
        const std::uint8_t* scales = b + 106;
        for (int g = 0; g < 8; ++g) {
            const float db = d * float(1 + 2 * ((scales[g / 2] >> (4 * (g % 2))) & 0xf));
            for (int r = 0; r < 8; ++r) {
                const int k = 8 * g + r;
                const unsigned idx = qs[k] | ((qh[k / 8] >> (k % 8)) & 1u) << 8;
                put_row4<S>(y + 4 * k, iq3s_grid[idx], db, signs[k / 2] >> (4 * (k % 2)));
            }
        }
    }
}

// Eight IQ1 grid values (int8 -1/0/1) shifted by delta, times dl.
template <class S>
inline void put_iq1_row(typename S::type* __restrict y, std::uint64_t row, float dl, float delta) noexcept {
    for (int j = 0; j < 8; ++j) y[j] = S::from(dl * (float(static_cast<std::int8_t>((row >> (8 * j)) & 0xff)) + delta));
}
constexpr float iq1_delta = 0.125f;

// block_iq1_s: d, qs[32] (grid index low bits), then per 32 elements a u16:
// four 3-bit high parts of the indices, a 3-bit scale, the delta's sign.
template <class S>
void iq1_s(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 50, y += 256) {
        const float d = load_half(b);
        const std::uint8_t* qs = b + 2;
        for (int g = 0; g < 8; ++g) {
            const std::uint16_t h = load_u16(b + 34 + 2 * g);
            const float dl = d * float(2 * ((h >> 12) & 7) + 1);
            const float delta = h & 0x8000 ? -iq1_delta : iq1_delta;
            for (int r = 0; r < 4; ++r) {
                const int k = 4 * g + r;
                put_iq1_row<S>(y + 8 * k, iq1s_grid[qs[k] | ((h >> (3 * r)) & 7u) << 8], dl, delta);
            }
        }
    }
}

// block_iq1_m: qs[32], qh[16] (per index a nibble: 3 high bits and the delta's
// sign), four u16 of 3-bit scales whose top nibbles together are the fp16 d.
template <class S>
void iq1_m(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 56, y += 256) {
        const std::uint8_t* qs = b;
        const std::uint8_t* qh = b + 32;
        std::uint16_t sc[4];
        for (int j = 0; j < 4; ++j) sc[j] = load_u16(b + 48 + 2 * j);
        const float d = half_to_float(std::uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                                    ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000)));
        for (int k = 0; k < 32; ++k) {
            const int s = k / 2;  // 16 scales, one per two rows
            const float dl = d * float(2 * ((sc[s / 4] >> (3 * (s % 4))) & 7) + 1);
            const unsigned nib = (qh[k / 2] >> (4 * (k % 2))) & 0xf;
            put_iq1_row<S>(y + 8 * k, iq1s_grid[qs[k] | (nib & 7u) << 8], dl, nib & 8 ? -iq1_delta : iq1_delta);
        }
    }
}

}  // namespace

void add_iq_grid_quants(kernel_table& t) noexcept {
    RINGSAFE_DEQUANT_SET(t, IQ2_XXS, iq2_xxs);
    RINGSAFE_DEQUANT_SET(t, IQ2_XS, iq2_xs);
    RINGSAFE_DEQUANT_SET(t, IQ2_S, iq2_s);
    RINGSAFE_DEQUANT_SET(t, IQ3_XXS, iq3_xxs);
    RINGSAFE_DEQUANT_SET(t, IQ3_S, iq3_s);
    RINGSAFE_DEQUANT_SET(t, IQ1_S, iq1_s);
    RINGSAFE_DEQUANT_SET(t, IQ1_M, iq1_m);
}

}  // namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA
