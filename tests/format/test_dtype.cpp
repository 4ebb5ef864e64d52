// Tests for include/ringsafe/dtype.hpp.
#include <catch2/catch.hpp>

#include "ringsafe/dtype.hpp"

using namespace ringsafe;

TEST_CASE("every dtype name round-trips and has the reference's bit size") {
    const std::pair<const char*, unsigned> expected[] = {
        {"BOOL", 8},  {"F4", 4},          {"F6_E2M3", 6},     {"F6_E3M2", 6}, {"U8", 8},
        {"I8", 8},    {"F8_E5M2", 8},     {"F8_E4M3", 8},     {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8},
        {"F8_E5M2FNUZ", 8}, {"I16", 16},  {"U16", 16},        {"F16", 16},    {"BF16", 16},
        {"I32", 32},  {"U32", 32},        {"F32", 32},        {"C64", 64},    {"F64", 64},
        {"I64", 64},  {"U64", 64},
    };
    REQUIRE(std::size(expected) == dtype_count);
    for (auto& [name, bits] : expected) {
        auto t = dtype_from_name(name);
        REQUIRE(t);
        CHECK(dtype_name(*t) == name);
        CHECK(dtype_bits(*t) == bits);
    }
}

TEST_CASE("dtype names are exact and case-sensitive") {
    CHECK_FALSE(dtype_from_name("f32"));
    CHECK_FALSE(dtype_from_name("F32 "));
    CHECK_FALSE(dtype_from_name("float32"));
    CHECK_FALSE(dtype_from_name("C128"));
    CHECK_FALSE(dtype_from_name(""));
}

TEST_CASE("byte sizes are computed in bits and must be whole bytes") {
    CHECK(dtype_bytes_for(dtype::F4, 4) == 2u);
    CHECK_FALSE(dtype_bytes_for(dtype::F4, 3));
    CHECK(dtype_bytes_for(dtype::F6_E2M3, 4) == 3u);
    CHECK_FALSE(dtype_bytes_for(dtype::F6_E3M2, 5));
    CHECK(dtype_bytes_for(dtype::C64, 2) == 16u);
    // 2^61 one-byte elements are 2^64 bits: overflow, as in the reference.
    CHECK_FALSE(dtype_bytes_for(dtype::U8, std::uint64_t{1} << 61));
    CHECK(dtype_bytes_for(dtype::U8, (std::uint64_t{1} << 61) - 1) == (std::uint64_t{1} << 61) - 1);
}
