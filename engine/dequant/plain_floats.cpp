// The plain float types as dequantizer inputs: F32 as it is, F16 and BF16
// widened exactly (outputs of their own type are copied before any kernel:
// conversion.cpp). And this build's table of every family's kernels.
#include "dequant/block_bits.hpp"

namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA {
namespace {

template <class S>
void from_f32(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i) y[i] = S::from(float_from_bits(load_u32(b + 4 * i)));
}

template <class S>
void from_f16(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i) y[i] = S::from(load_half(b + 2 * i));
}

template <class S>
void from_bf16(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i) y[i] = S::from(bf16_to_float(load_u16(b + 2 * i)));
}

}  // namespace

void add_plain_floats(kernel_table& t) noexcept {
    RINGSAFE_DEQUANT_SET(t, F32, from_f32);
    RINGSAFE_DEQUANT_SET(t, F16, from_f16);
    RINGSAFE_DEQUANT_SET(t, BF16, from_bf16);
}

kernel_table make_kernels() noexcept {
    kernel_table t;
    add_plain_floats(t);
    add_legacy_quants(t);
    add_k_quants(t);
    add_iq_grid_quants(t);
    add_iq_nonlinear(t);
    add_ternary_fp4(t);
    return t;
}

}  // namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA
