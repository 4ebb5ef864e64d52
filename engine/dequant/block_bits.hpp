// What every kernel reads blocks with and writes values with (engine-internal):
// little-endian loads from unaligned bytes, ggml's small float formats (fp16,
// bf16, E8M0, UE4M3) widened exactly to float32, and the three outputs'
// stores (float32 as it is; float16 and bfloat16 rounded to nearest even).
// Inside the build's ISA namespace, as the kernels are (kernels.hpp).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "dequant/kernels.hpp"

static_assert(std::endian::native == std::endian::little,
              "GGUF blocks are little-endian; the kernels read them as they are");

namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA {

inline std::uint16_t load_u16(const std::uint8_t* p) noexcept {
    std::uint16_t v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
inline std::uint32_t load_u32(const std::uint8_t* p) noexcept {
    std::uint32_t v;
    __builtin_memcpy(&v, p, sizeof v);
    return v;
}
inline float float_from_bits(std::uint32_t u) noexcept {
    float f;
    __builtin_memcpy(&f, &u, sizeof f);
    return f;
}
inline std::uint32_t bits_of(float f) noexcept {
    std::uint32_t u;
    __builtin_memcpy(&u, &f, sizeof u);
    return u;
}

// IEEE binary16 -> float32, exact for every input (subnormals, infinities; a
// NaN keeps its sign and payload).
inline float half_to_float(std::uint16_t h) noexcept {
    const std::uint32_t exp_mask = 0x7c00u << 13;
    std::uint32_t u = (h & 0x7fffu) << 13;
    const std::uint32_t exp = u & exp_mask;
    u += (127 - 15) << 23;  // rebias the exponent
    float f;
    if (exp == exp_mask) {
        f = float_from_bits(u + ((128 - 16) << 23));  // infinity or NaN: exponent 255
    } else if (exp == 0) {
        // Subnormal or zero: a normal of exponent -14 minus 2^-14, exactly.
        f = float_from_bits(u + (1u << 23)) - float_from_bits(113u << 23);
    } else {
        f = float_from_bits(u);
    }
    return float_from_bits(bits_of(f) | ((h & 0x8000u) << 16));
}
inline float load_half(const std::uint8_t* p) noexcept { return half_to_float(load_u16(p)); }

// bfloat16 -> float32: the top half of the float32's bits.
inline float bf16_to_float(std::uint16_t b) noexcept { return float_from_bits(std::uint32_t{b} << 16); }

// An E8M0 exponent byte as ggml's MXFP4 scale: 2^(e - 128), half the power
// the byte encodes, since the E2M1 values are stored doubled.
inline float e8m0_half(std::uint8_t e) noexcept {
    return float_from_bits(e < 2 ? 0x00200000u << e : std::uint32_t(e - 1) << 23);
}

// An unsigned E4M3 scale byte (bias 7) as NVFP4 uses it: halved like E8M0
// above, 0x00 and 0x7f give 0; the top bit is ignored, as gguf-py does.
inline float ue4m3_half(std::uint8_t x) noexcept {
    if (x == 0 || x == 0x7f) return 0.0f;
    const unsigned exp = (x >> 3) & 0xfu;
    const unsigned man = x & 0x7u;
    // Both forms are exact in float32: man x 2^-9, or (8 + man) x 2^(exp - 10).
    const float raw = exp == 0 ? float(man) * float_from_bits((127u - 9) << 23)
                               : float(8 + man) * float_from_bits((127u + exp - 10) << 23);
    return raw * 0.5f;
}

// float32 -> float16, rounding to nearest even; a NaN becomes sign | 0x7e00.
// Written as selects of three candidates, so that loops of it vectorize:
// values too large for float16 (>= 65536 before rounding), infinities and
// NaNs; values below 2^-14, rounded to a subnormal by a float32 addition of
// 0.5 (whose ulp is float16's subnormal step); normals, rounded on the 13
// dropped bits.
inline std::uint16_t float_to_half(float f) noexcept {
    const std::uint32_t u = bits_of(f);
    const std::uint32_t a = u & 0x7fffffffu;
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const auto sa = static_cast<std::int32_t>(a);  // compared as int32, as float_to_bf16 does
    const std::uint32_t big = 0x7c00u | (std::uint32_t(sa > 0x7f800000) << 9);
    const std::uint32_t sub = bits_of(float_from_bits(a) + 0.5f) - (126u << 23);
    const std::uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    // Masks, not branches: all ones where a case holds.
    const std::uint32_t is_big = 0u - std::uint32_t(sa >= (143 << 23));
    const std::uint32_t is_sub = 0u - std::uint32_t(sa < (113 << 23));
    const std::uint32_t h = (big & is_big) | (sub & is_sub) | (normal & ~(is_big | is_sub));
    return std::uint16_t(h | sign);
}

// float32 -> bfloat16, rounding to nearest even on the low 16 bits; a NaN
// becomes 0x7fc0 (as torch makes it). The magnitude is compared as an int32:
// one SIMD compare, where an unsigned one takes several before AVX-512.
inline std::uint16_t float_to_bf16(float f) noexcept {
    const std::uint32_t u = bits_of(f);
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const auto a = static_cast<std::int32_t>(u & 0x7fffffffu);
    return std::uint16_t(a > 0x7f800000 ? 0x7fc0u : rounded);
}

// How a kernel stores a value: every kernel is a template over one of these.
struct store_f32 {
    using type = float;
    static float from(float v) noexcept { return v; }
};
struct store_f16 {
    using type = std::uint16_t;
    static std::uint16_t from(float v) noexcept { return float_to_half(v); }
};
struct store_bf16 {
    using type = std::uint16_t;
    static std::uint16_t from(float v) noexcept { return float_to_bf16(v); }
};

// The kernel template `k` for each output, into table `t`.
#define RINGSAFE_DEQUANT_SET(t, type, k) t.set(ggml_type::type, k<store_f32>, k<store_f16>, k<store_bf16>)

}  // namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA
