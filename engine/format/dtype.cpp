// The dtype table: names and sizes in bits.
#include "ringsafe/dtype.hpp"

#include <array>

namespace ringsafe {
namespace {

struct dtype_row {
    std::string_view name;
    unsigned bits;
};

// Indexed by the enum's value; keep in the enum's order.
constexpr std::array<dtype_row, dtype_count> table{{
    {"BOOL", 8},        {"F4", 4},           {"F6_E2M3", 6},      {"F6_E3M2", 6},
    {"U8", 8},          {"I8", 8},           {"F8_E5M2", 8},      {"F8_E4M3", 8},
    {"F8_E8M0", 8},     {"F8_E4M3FNUZ", 8},  {"F8_E5M2FNUZ", 8},  {"I16", 16},
    {"U16", 16},        {"F16", 16},         {"BF16", 16},        {"I32", 32},
    {"U32", 32},        {"F32", 32},         {"C64", 64},         {"F64", 64},
    {"I64", 64},        {"U64", 64},
}};

}  // namespace

unsigned dtype_bits(dtype t) noexcept { return table[static_cast<std::size_t>(t)].bits; }

std::string_view dtype_name(dtype t) noexcept { return table[static_cast<std::size_t>(t)].name; }

std::optional<dtype> dtype_from_name(std::string_view name) noexcept {
    for (std::size_t i = 0; i < table.size(); ++i)
        if (table[i].name == name) return static_cast<dtype>(i);
    return std::nullopt;
}

std::optional<std::uint64_t> dtype_bytes_for(dtype t, std::uint64_t elements) noexcept {
    std::uint64_t bits = 0;
    if (__builtin_mul_overflow(elements, std::uint64_t{dtype_bits(t)}, &bits)) return std::nullopt;
    if (bits % 8 != 0) return std::nullopt;
    return bits / 8;
}

}  // namespace ringsafe
