// Element types of the safetensors format, with their sizes in bits.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ringsafe {

// The dtypes of the reference format, in the reference's enum order (the
// reference writer lays tensors out in descending order of this enum).
enum class dtype : std::uint8_t {
    BOOL,
    F4,
    F6_E2M3,
    F6_E3M2,
    U8,
    I8,
    F8_E5M2,
    F8_E4M3,
    F8_E8M0,
    F8_E4M3FNUZ,
    F8_E5M2FNUZ,
    I16,
    U16,
    F16,
    BF16,
    I32,
    U32,
    F32,
    C64,
    F64,
    I64,
    U64,
};

// Number of dtypes in the table above.
inline constexpr int dtype_count = 22;

// Size of one element in bits (4 for F4, 6 for F6_*, 8 for BOOL, ...).
unsigned dtype_bits(dtype t) noexcept;

// The exact, case-sensitive name used in headers ("BF16", "F8_E4M3", ...).
std::string_view dtype_name(dtype t) noexcept;

// Parses a dtype name; nullopt when it is not one of the names above.
std::optional<dtype> dtype_from_name(std::string_view name) noexcept;

// Bytes occupied by `elements` elements of `t`, or nullopt when the size in
// bits overflows 64 bits or is not a whole number of bytes.
std::optional<std::uint64_t> dtype_bytes_for(dtype t, std::uint64_t elements) noexcept;

}  // namespace ringsafe
