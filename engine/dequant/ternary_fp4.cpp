// The ternary types (TQ1_0: base-3 digits packed five to a byte; TQ2_0: two
// bits each; values -1, 0, 1 times an fp16 scale) and the 4-bit floats (MXFP4:
// E2M1 values with an E8M0 scale per 32; NVFP4: with a UE4M3 scale per 16).
#include "dequant/block_bits.hpp"

namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA {
namespace {

// Digit p of a TQ1_0 byte: the byte times 3^p (mod 256) scaled to 0..2, minus 1.
inline int ternary_digit(std::uint8_t q, unsigned pow3) noexcept {
    const unsigned shifted = std::uint8_t(q * pow3);
    return int((shifted * 3) >> 8) - 1;
}
constexpr unsigned pow3[5] = {1, 3, 9, 27, 81};

// block_tq1_0: qs[48] (5 digits each: elements 32p + l from qs[l], l < 32, then
// 160 + 16p + l from qs[32 + l]), qh[4] (4 digits each: 240 + 4p + l), d.
template <class S>
void tq1_0(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 54, y += 256) {
        const float d = load_half(b + 52);
        for (int p = 0; p < 5; ++p) {
            for (int l = 0; l < 32; ++l) y[32 * p + l] = S::from(d * float(ternary_digit(b[l], pow3[p])));
            for (int l = 0; l < 16; ++l) y[160 + 16 * p + l] = S::from(d * float(ternary_digit(b[32 + l], pow3[p])));
        }
        for (int p = 0; p < 4; ++p)
            for (int l = 0; l < 4; ++l) y[240 + 4 * p + l] = S::from(d * float(ternary_digit(b[48 + l], pow3[p])));
    }
}

// block_tq2_0: qs[64], d. Element 128h + 32s + l is bits 2s of qs[32h + l], minus 1.
template <class S>
void tq2_0(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 66, y += 256) {
        const float d = load_half(b + 64);
        for (int h = 0; h < 2; ++h)
            for (int s = 0; s < 4; ++s)
                for (int l = 0; l < 32; ++l) y[128 * h + 32 * s + l] = S::from(d * float(int((b[32 * h + l] >> (2 * s)) & 3) - 1));
    }
}

// E2M1 values, doubled (the scales are halved to match: block_bits.hpp).
constexpr std::int8_t e2m1_doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2 x 8 elements of 8 bytes or 2 x 16 of 16: low nibbles first, then high ones.
template <class S, int Bytes>
inline void put_e2m1(typename S::type* __restrict y, const std::uint8_t* __restrict q, float d) noexcept {
    for (int j = 0; j < Bytes; ++j) {
        y[j] = S::from(d * float(e2m1_doubled[q[j] & 0xf]));
        y[j + Bytes] = S::from(d * float(e2m1_doubled[q[j] >> 4]));
    }
}

// block_mxfp4: e (E8M0), qs[16].
template <class S>
void mxfp4(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 17, y += 32) put_e2m1<S, 16>(y, b + 1, e8m0_half(b[0]));
}

// block_nvfp4: four UE4M3 scales, then 4 x 8 bytes, one group of 16 elements each.
template <class S>
void nvfp4(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 36, y += 64)
        for (int s = 0; s < 4; ++s) put_e2m1<S, 8>(y + 16 * s, b + 4 + 8 * s, ue4m3_half(b[s]));
}

}  // namespace

void add_ternary_fp4(kernel_table& t) noexcept {
    RINGSAFE_DEQUANT_SET(t, TQ1_0, tq1_0);
    RINGSAFE_DEQUANT_SET(t, TQ2_0, tq2_0);
    RINGSAFE_DEQUANT_SET(t, MXFP4, mxfp4);
    RINGSAFE_DEQUANT_SET(t, NVFP4, nvfp4);
}

}  // namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA
