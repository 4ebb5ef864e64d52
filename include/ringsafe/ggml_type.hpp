// The tensor types of GGUF files (ggml's type table): ids as stored in a file,
// names as gguf-py's GGMLQuantizationType spells them, and block sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ringsafe/dtype.hpp"

namespace ringsafe {

// ggml's type ids (ggml.h's enum ggml_type, GGML_TYPE_COUNT 43). Ids 4, 5,
// 31-33 and 36-38 are types ggml removed: a file that uses one is rejected.
enum class ggml_type : std::uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
    NVFP4 = 40,
    Q1_0 = 41,
    Q2_0 = 42,
    // Not a ggml type: a tensor_info of a safetensors file has this.
    none = 0xffffffffu,
};

// One past the largest id ggml knows (GGML_TYPE_COUNT).
inline constexpr std::uint32_t ggml_type_count = 43;

// A type's layout: `block_size` elements are stored in `type_size` bytes.
// Plain types have block_size 1. A removed or unknown id has both 0.
struct ggml_type_traits {
    std::string_view name;     // "Q4_K", "BF16", ...; empty for a removed or unknown id
    std::uint32_t block_size;  // elements per block
    std::uint32_t type_size;   // bytes per block
};

// The traits of type id `id` (any value: ids that ggml removed or never had give {"", 0, 0}).
ggml_type_traits ggml_traits(std::uint32_t id) noexcept;
inline ggml_type_traits ggml_traits(ggml_type t) noexcept { return ggml_traits(static_cast<std::uint32_t>(t)); }

// The type's name as gguf-py spells it ("Q4_K"); "" for none or an unknown id.
inline std::string_view ggml_type_name(ggml_type t) noexcept { return ggml_traits(t).name; }

// Parses a name as ggml_type_name() spells it; nullopt for any other text.
std::optional<ggml_type> ggml_type_from_name(std::string_view name) noexcept;

// True for a type whose blocks hold more than one element (Q4_0, Q4_K, IQ4_XS, MXFP4, ...).
inline bool ggml_is_quantized(ggml_type t) noexcept { return ggml_traits(t).block_size > 1; }

// Bytes that `elements` elements of `t` occupy: elements / block_size * type_size;
// nullopt when `elements` is not a whole number of blocks, the type has no
// layout, or the size overflows 64 bits.
std::optional<std::uint64_t> ggml_bytes_for(ggml_type t, std::uint64_t elements) noexcept;

// The safetensors dtype that holds a plain ggml type's elements as they are
// (F32, F16, BF16, F64, I8, I16, I32, I64); nullopt for block types.
std::optional<dtype> ggml_plain_dtype(ggml_type t) noexcept;

// The ggml type that stores a dtype's elements as they are; nullopt for the
// dtypes GGUF has no type for (BOOL, U8-U64, F8_*, F4, F6_*, C64).
std::optional<ggml_type> ggml_type_for(dtype t) noexcept;

}  // namespace ringsafe
