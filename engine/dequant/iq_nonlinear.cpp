// The non-linear i-quants: 4-bit indices into ggml's 16 non-uniform levels
// (kvalues_iq4nl), in blocks of 32 with an fp16 scale (IQ4_NL) or super-blocks
// of 256 with 6-bit sub-block scales (IQ4_XS).
#include "dequant/block_bits.hpp"

namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA {
namespace {

constexpr std::int8_t iq4nl_levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// 32 elements from 16 bytes: element j is the low nibble of q[j], j + 16 the high one.
template <class S>
inline void put_iq4_32(typename S::type* __restrict y, const std::uint8_t* __restrict q, float d) noexcept {
    for (int j = 0; j < 16; ++j) {
        y[j] = S::from(d * float(iq4nl_levels[q[j] & 0xf]));
        y[j + 16] = S::from(d * float(iq4nl_levels[q[j] >> 4]));
    }
}

// block_iq4_nl: d, qs[16].
template <class S>
void iq4_nl(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 18, y += 32) put_iq4_32<S>(y, b + 2, load_half(b));
}

// block_iq4_xs: d, scales_h (u16: 2 high bits per sub-block), scales_l[4]
// (a nibble per sub-block), qs[128]; sub-block scale = d x (6 bits - 32).
template <class S>
void iq4_xs(const std::uint8_t* __restrict b, std::size_t n, void* out_) noexcept {
    auto* __restrict y = static_cast<typename S::type*>(out_);
    for (std::size_t i = 0; i < n; ++i, b += 136, y += 256) {
        const float d = load_half(b);
        const std::uint16_t sh = load_u16(b + 2);
        const std::uint8_t* sl = b + 4;
        for (int g = 0; g < 8; ++g) {
            const int lo = (sl[g / 2] >> (4 * (g % 2))) & 0xf;
            const int hi = (sh >> (2 * g)) & 3;
            put_iq4_32<S>(y + 32 * g, b + 8 + 16 * g, d * float((lo | hi << 4) - 32));
        }
    }
}

}  // namespace

void add_iq_nonlinear(kernel_table& t) noexcept {
    RINGSAFE_DEQUANT_SET(t, IQ4_NL, iq4_nl);
    RINGSAFE_DEQUANT_SET(t, IQ4_XS, iq4_xs);
}

}  // namespace ringsafe::dequant::RINGSAFE_DEQUANT_ISA
