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
// values at `out` (float32, or float16/bfloat16 bits; aligned to the output's
// size; not overlapping the blocks). Any bytes are valid input.
using kernel_fn = void (*)(const std::uint8_t* blocks, std::size_t nblocks, void* out) noexcept;

// The outputs, as the kernel table indexes them.
enum class output : std::uint8_t { f32, f16, bf16 };
inline constexpr std::size_t output_count = 3;

// A kernel per ggml type id and output; null for the types with none.
struct kernel_table {
    std::array<std::array<kernel_fn, output_count>, ggml_type_count> kernels{};
    void set(ggml_type t, kernel_fn f32, kernel_fn f16, kernel_fn bf16) noexcept {
        kernels[static_cast<std::uint32_t>(t)] = {f32, f16, bf16};
    }
    kernel_fn get(std::uint32_t id, output o) const noexcept {
        return id < ggml_type_count ? kernels[id][static_cast<std::size_t>(o)] : nullptr;
    }
};

// The kernels of the best build this CPU runs (chosen once, then constant).
const kernel_table& cpu_kernels() noexcept;

namespace RINGSAFE_DEQUANT_ISA {
// Each family's kernels, added to `t` (legacy_quants.cpp, k_quants.cpp,
// iq_grid_quants.cpp, iq_nonlinear.cpp, ternary_fp4.cpp, plain_floats.cpp).
void add_legacy_quants(kernel_table& t) noexcept;
void add_k_quants(kernel_table& t) noexcept;
void add_iq_grid_quants(kernel_table& t) noexcept;
void add_iq_nonlinear(kernel_table& t) noexcept;
void add_ternary_fp4(kernel_table& t) noexcept;
void add_plain_floats(kernel_table& t) noexcept;
// This build's table, every family's kernels in it (plain_floats.cpp).
kernel_table make_kernels() noexcept;
}  // namespace RINGSAFE_DEQUANT_ISA

}  // namespace ringsafe::dequant
