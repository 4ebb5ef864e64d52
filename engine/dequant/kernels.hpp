// The dequantization kernels (engine-internal): one function per ggml type that
// turns whole blocks into float32 values, and the table that picks them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "ringsafe/ggml_type.hpp"

// The kernels are compiled once per instruction set (dequant/meson.build): each
// build's code lives in ringsafe::dequant::RINGSAFE_DEQUANT_ISA, so that no
// inline function of one build can stand in for another's at link time.
#ifndef RINGSAFE_DEQUANT_ISA
#define RINGSAFE_DEQUANT_ISA portable
#endif

namespace ringsafe::dequant {

// Dequantizes `nblocks` whole blocks at `blocks` into nblocks x block_size
// float32 values at `out` (aligned to 4). Any bytes are valid input.
using kernel_fn = void (*)(const std::uint8_t* blocks, std::size_t nblocks, float* out) noexcept;

// A kernel per ggml type id; null for the types with none.
struct kernel_table {
    std::array<kernel_fn, ggml_type_count> to_f32{};
    void set(ggml_type t, kernel_fn f) noexcept { to_f32[static_cast<std::uint32_t>(t)] = f; }
};

// float32 -> float16 / bfloat16, rounding to nearest even (NaN -> a quiet NaN).
using narrow_fn = void (*)(const float* in, std::size_t n, std::uint16_t* out) noexcept;

// What one instruction set's build provides.
struct isa_kernels {
    kernel_table table;
    narrow_fn to_f16 = nullptr;
    narrow_fn to_bf16 = nullptr;
};

// The kernels of the best build this CPU runs (chosen once, then constant).
const isa_kernels& cpu_kernels() noexcept;

namespace RINGSAFE_DEQUANT_ISA {
// Each family's kernels, added to `t` (legacy_quants.cpp, k_quants.cpp,
// iq_grid_quants.cpp, iq_nonlinear.cpp, ternary_fp4.cpp, plain_floats.cpp).
void add_legacy_quants(kernel_table& t) noexcept;
void add_k_quants(kernel_table& t) noexcept;
void add_iq_grid_quants(kernel_table& t) noexcept;
void add_iq_nonlinear(kernel_table& t) noexcept;
void add_ternary_fp4(kernel_table& t) noexcept;
void add_plain_floats(kernel_table& t) noexcept;
// This build's table and narrowing conversions (plain_floats.cpp).
isa_kernels make_kernels() noexcept;
}  // namespace RINGSAFE_DEQUANT_ISA

}  // namespace ringsafe::dequant
