// The plain float types as dequantizer inputs (F32 as it is, F16 and BF16
// widened exactly), and float32 narrowed to float16 / bfloat16 for the
// outputs, rounding to nearest even as torch's `.to()` does.
#include "dequant/block_bits.hpp"

namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA {
namespace {

void from_f32(const std::uint8_t* b, std::size_t n, float* y) noexcept { __builtin_memcpy(y, b, 4 * n); }

void from_f16(const std::uint8_t* b, std::size_t n, float* y) noexcept {
    for (std::size_t i = 0; i < n; ++i) y[i] = load_half(b + 2 * i);
}

void from_bf16(const std::uint8_t* b, std::size_t n, float* y) noexcept {
    for (std::size_t i = 0; i < n; ++i) y[i] = bf16_to_float(load_u16(b + 2 * i));
}

// Written as selects of three candidates, so the loop vectorizes: values too
// large for float16 (>= 65536 before rounding), infinities and NaNs; values
// below 2^-14, rounded to a subnormal by a float32 addition of 0.5 (whose ulp
// is float16's subnormal step); and normals, rounded on the 13 dropped bits.
inline std::uint16_t float_to_half(float f) noexcept {
    const std::uint32_t u = bits_of(f);
    const std::uint32_t a = u & 0x7fffffffu;
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    const std::uint32_t big = a > 0x7f800000u ? 0x7e00u : 0x7c00u;
    const std::uint32_t sub = bits_of(float_from_bits(a) + 0.5f) - (126u << 23);
    const std::uint32_t normal = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    const std::uint32_t h = a >= (143u << 23) ? big : a < (113u << 23) ? sub : normal;
    return std::uint16_t(h | sign);
}

void to_f16(const float* x, std::size_t n, std::uint16_t* y) noexcept {
    for (std::size_t i = 0; i < n; ++i) y[i] = float_to_half(x[i]);
}

// A NaN becomes 0x7fc0 (torch's); everything else rounds on the low 16 bits.
void to_bf16(const float* x, std::size_t n, std::uint16_t* y) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint32_t u = bits_of(x[i]);
        const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
        y[i] = std::uint16_t((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded);
    }
}

}  // namespace

void add_plain_floats(kernel_table& t) noexcept {
    t.set(ggml_type::F32, from_f32);
    t.set(ggml_type::F16, from_f16);
    t.set(ggml_type::BF16, from_bf16);
}

isa_kernels make_kernels() noexcept {
    isa_kernels k;
    add_plain_floats(k.table);
    add_legacy_quants(k.table);
    add_k_quants(k.table);
    add_iq_grid_quants(k.table);
    add_iq_nonlinear(k.table);
    add_ternary_fp4(k.table);
    k.to_f16 = to_f16;
    k.to_bf16 = to_bf16;
    return k;
}

}  // namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA
