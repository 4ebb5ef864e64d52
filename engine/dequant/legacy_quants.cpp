// The legacy block types: one fp16 scale (and for Q4_1/Q5_1 an fp16 minimum)
// per block of 32 (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), 64 (Q2_0) or 128 (Q1_0)
// elements. Layouts as ggml's block_q* structs; the arithmetic in ggml's
// order (scale x value, then + minimum), each step rounded to float32.
#include "dequant/block_bits.hpp"

namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA {
namespace {

// block_q4_0: d, 16 bytes of nibbles; element j is qs[j]'s low nibble, j+16 its high one.
template <class S>
void q4_0(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 18, y += 32) {
        const float d = load_half(b);
        const std::uint8_t* qs = b + 2;
        for (int j = 0; j < 16; ++j) {
            y[j] = S::from(d * float(int(qs[j] & 0xf) - 8));
            y[j + 16] = S::from(d * float(int(qs[j] >> 4) - 8));
        }
    }
}

// block_q4_1: d, m, nibbles as Q4_0, unsigned; y = d*q + m.
template <class S>
void q4_1(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 20, y += 32) {
        const float d = load_half(b);
        const float m = load_half(b + 2);
        const std::uint8_t* qs = b + 4;
        for (int j = 0; j < 16; ++j) {
            y[j] = S::from(d * float(qs[j] & 0xf) + m);
            y[j + 16] = S::from(d * float(qs[j] >> 4) + m);
        }
    }
}

// block_q5_0: d, qh (bit j: the fifth bit of element j), nibbles as Q4_0; q - 16.
template <class S>
void q5_0(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 22, y += 32) {
        const float d = load_half(b);
        const std::uint32_t qh = load_u32(b + 2);
        const std::uint8_t* qs = b + 6;
        for (int j = 0; j < 16; ++j) {
            const int lo = (qs[j] & 0xf) | int((qh >> j) & 1) << 4;
            const int hi = (qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
            y[j] = S::from(d * float(lo - 16));
            y[j + 16] = S::from(d * float(hi - 16));
        }
    }
}

// block_q5_1: d, m, qh, nibbles; unsigned; y = d*q + m.
template <class S>
void q5_1(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 24, y += 32) {
        const float d = load_half(b);
        const float m = load_half(b + 2);
        const std::uint32_t qh = load_u32(b + 4);
        const std::uint8_t* qs = b + 8;
        for (int j = 0; j < 16; ++j) {
            const unsigned lo = (qs[j] & 0xfu) | ((qh >> j) & 1u) << 4;
            const unsigned hi = (qs[j] >> 4) | ((qh >> (j + 16)) & 1u) << 4;
            y[j] = S::from(d * float(lo) + m);
            y[j + 16] = S::from(d * float(hi) + m);
        }
    }
}

// block_q8_0: d, 32 signed bytes.
template <class S>
void q8_0(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 34, y += 32) {
        const float d = load_half(b);
        const std::uint8_t* qs = b + 2;
        for (int j = 0; j < 32; ++j) y[j] = S::from(float(static_cast<std::int8_t>(qs[j])) * d);
    }
}

// block_q1_0: d, 128 sign bits (bit j%8 of byte j/8): +d or -d.
template <class S>
void q1_0(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 18, y += 128) {
        const float d = load_half(b);
        const std::uint8_t* qs = b + 2;
        for (int j = 0; j < 128; ++j) y[j] = S::from(d * float(int((qs[j >> 3] >> (j & 7)) & 1) * 2 - 1));
    }
}

// block_q2_0: d, 64 two-bit values (bits 2(j%4) of byte j/4), q - 1.
template <class S>
void q2_0(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 18, y += 64) {
        const float d = load_half(b);
        const std::uint8_t* qs = b + 2;
        for (int j = 0; j < 64; ++j) y[j] = S::from(d * float(int((qs[j >> 2] >> (2 * (j & 3))) & 3) - 1));
    }
}

}  // namespace

void add_legacy_quants(kernel_table& t) noexcept {
    RINGSAFE_DEQUANT_SET(t, Q4_0, q4_0);
    RINGSAFE_DEQUANT_SET(t, Q4_1, q4_1);
    RINGSAFE_DEQUANT_SET(t, Q5_0, q5_0);
    RINGSAFE_DEQUANT_SET(t, Q5_1, q5_1);
    RINGSAFE_DEQUANT_SET(t, Q8_0, q8_0);
    RINGSAFE_DEQUANT_SET(t, Q1_0, q1_0);
    RINGSAFE_DEQUANT_SET(t, Q2_0, q2_0);
}

}  // namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA
