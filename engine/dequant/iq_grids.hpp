// The i-quants' lookup grids (engine-internal; the numbers are in the generated
// iq_grids.cpp, tools/scripts/gen_dequant_grids.py). Row i of a grid holds the
// values of grid index i, element j in byte j: unsigned magnitudes for the
// IQ2/IQ3 grids, int8 -1/0/1 for IQ1's.
#pragma once

#include <cstdint>

namespace ringsafe::dequant {

extern const std::uint64_t iq2xxs_grid[256];  // IQ2_XXS: 8 values of {8, 25, 43}
extern const std::uint64_t iq2xs_grid[512];   // IQ2_XS: 8 values of {8, 25, 43}
extern const std::uint64_t iq2s_grid[1024];   // IQ2_S: 8 values of {8, 25, 43}
extern const std::uint32_t iq3xxs_grid[256];  // IQ3_XXS: 4 values of {4, 12, ..., 62}
extern const std::uint32_t iq3s_grid[512];    // IQ3_S: 4 values of {1, 3, ..., 15}
extern const std::uint64_t iq1s_grid[2048];   // IQ1_S and IQ1_M: 8 int8 values of {-1, 0, 1}

}  // namespace ringsafe::dequant
