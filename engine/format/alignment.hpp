// Rounding to a multiple of an alignment (any positive value, not only
// powers of two): the one helper for O_DIRECT blocks, pages, padding.
#pragma once

namespace ringsafe::format {

template <class T>
constexpr T align_down(T v, T a) noexcept {
    return v / a * a;
}
template <class T>
constexpr T align_up(T v, T a) noexcept {
    return (v + a - 1) / a * a;
}

}  // namespace ringsafe::format
