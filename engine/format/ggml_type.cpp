// ggml's type table: names, elements per block and bytes per block, by id.
#include "ringsafe/ggml_type.hpp"

#include <array>

namespace ringsafe {
namespace {

// Indexed by id; removed ids (4, 5, 31-33, 36-38) are {"", 0, 0}, as ggml's
// table has block size 0 for them.
constexpr std::array<ggml_type_traits, ggml_type_count> type_table{{
    {"F32", 1, 4},       {"F16", 1, 2},      {"Q4_0", 32, 18},    {"Q4_1", 32, 20},   {"", 0, 0},
    {"", 0, 0},          {"Q5_0", 32, 22},   {"Q5_1", 32, 24},    {"Q8_0", 32, 34},   {"Q8_1", 32, 36},
    {"Q2_K", 256, 84},   {"Q3_K", 256, 110}, {"Q4_K", 256, 144},  {"Q5_K", 256, 176}, {"Q6_K", 256, 210},
    {"Q8_K", 256, 292},  {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},  {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82}, {"IQ4_XS", 256, 136}, {"I8", 1, 1},
    {"I16", 1, 2},       {"I32", 1, 4},      {"I64", 1, 8},       {"F64", 1, 8},      {"IQ1_M", 256, 56},
    {"BF16", 1, 2},      {"", 0, 0},         {"", 0, 0},          {"", 0, 0},         {"TQ1_0", 256, 54},
    {"TQ2_0", 256, 66},  {"", 0, 0},         {"", 0, 0},          {"", 0, 0},         {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},   {"Q1_0", 128, 18},  {"Q2_0", 64, 18},
}};

struct plain_pair {
    ggml_type g;
    dtype d;
};
constexpr std::array<plain_pair, 8> plain{{
    {ggml_type::F32, dtype::F32},
    {ggml_type::F16, dtype::F16},
    {ggml_type::BF16, dtype::BF16},
    {ggml_type::F64, dtype::F64},
    {ggml_type::I8, dtype::I8},
    {ggml_type::I16, dtype::I16},
    {ggml_type::I32, dtype::I32},
    {ggml_type::I64, dtype::I64},
}};

}  // namespace

ggml_type_traits ggml_traits(std::uint32_t id) noexcept {
    if (id >= type_table.size()) return {"", 0, 0};
    return type_table[id];
}

std::optional<ggml_type> ggml_type_from_name(std::string_view name) noexcept {
    if (name.empty()) return std::nullopt;
    for (std::uint32_t i = 0; i < type_table.size(); ++i)
        if (type_table[i].name == name) return static_cast<ggml_type>(i);
    return std::nullopt;
}

std::optional<std::uint64_t> ggml_bytes_for(ggml_type t, std::uint64_t elements) noexcept {
    const ggml_type_traits tr = ggml_traits(t);
    if (tr.block_size == 0 || elements % tr.block_size != 0) return std::nullopt;
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(elements / tr.block_size, std::uint64_t{tr.type_size}, &bytes)) return std::nullopt;
    return bytes;
}

std::optional<dtype> ggml_plain_dtype(ggml_type t) noexcept {
    for (const plain_pair& p : plain)
        if (p.g == t) return p.d;
    return std::nullopt;
}

std::optional<ggml_type> ggml_type_for(dtype t) noexcept {
    for (const plain_pair& p : plain)
        if (p.d == t) return p.g;
    return std::nullopt;
}

}  // namespace ringsafe
