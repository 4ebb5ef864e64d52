// Tests for include/ringsafe/ggml_type.hpp: ggml's type table as the GGUF corpus's README gives it.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "ringsafe/ggml_type.hpp"
#include "test_support.hpp"

using namespace ringsafe;

TEST_CASE("ggml's type table agrees with the GGUF corpus's README, row by row") {
    // The README's table: | id | type | ggml name | elements per block | bytes per block | ...
    std::ifstream in(test::shared_dir() / "conformance-gguf" / "README.md");
    REQUIRE(in);  // ../shared is part of the test environment (tests/README.md)
    std::stringstream text;
    text << in.rdbuf();
    const std::regex row(R"(\n\| *(\d+) \| ([^|]+?) \| [^|]*\| *(\d+) \| *(\d+) \|)");
    int rows = 0;
    const std::string s = text.str();
    for (std::sregex_iterator it(s.begin(), s.end(), row), end; it != end; ++it) {
        const auto id = static_cast<std::uint32_t>(std::stoul((*it)[1]));
        const std::string type = (*it)[2];
        const auto block = static_cast<std::uint32_t>(std::stoul((*it)[3]));
        const auto bytes = static_cast<std::uint32_t>(std::stoul((*it)[4]));
        INFO("id " << id << " " << type);
        const ggml_type_traits t = ggml_traits(id);
        CHECK(t.block_size == block);
        CHECK(t.type_size == bytes);
        if (block == 0) {
            CHECK(t.name.empty());
        } else {
            CHECK(t.name == type);
            CHECK(ggml_type_from_name(type) == static_cast<ggml_type>(id));
        }
        ++rows;
    }
    CHECK(rows == static_cast<int>(ggml_type_count));
}

TEST_CASE("ids past the table and the none marker have no layout") {
    CHECK(ggml_traits(ggml_type_count).block_size == 0);
    CHECK(ggml_traits(ggml_type::none).name.empty());
    CHECK_FALSE(ggml_type_from_name(""));
    CHECK_FALSE(ggml_type_from_name("q4_k"));  // names are gguf-py's, case-sensitive
    CHECK_FALSE(ggml_is_quantized(ggml_type::none));
    CHECK(ggml_is_quantized(ggml_type::Q4_K));
    CHECK_FALSE(ggml_is_quantized(ggml_type::BF16));
}

TEST_CASE("sizes are whole blocks and never overflow") {
    CHECK(ggml_bytes_for(ggml_type::Q4_K, 512) == 288u);
    CHECK(ggml_bytes_for(ggml_type::F16, 3) == 6u);
    CHECK_FALSE(ggml_bytes_for(ggml_type::Q8_0, 33));     // not a whole block
    CHECK_FALSE(ggml_bytes_for(ggml_type::none, 1));
    CHECK_FALSE(ggml_bytes_for(static_cast<ggml_type>(4), 32));  // removed
    CHECK_FALSE(ggml_bytes_for(ggml_type::I64, std::uint64_t{1} << 62));
}

TEST_CASE("plain ggml types and safetensors dtypes map both ways") {
    for (std::uint32_t id = 0; id < ggml_type_count; ++id) {
        const auto g = static_cast<ggml_type>(id);
        if (auto d = ggml_plain_dtype(g)) {
            CHECK(ggml_traits(g).block_size == 1);
            CHECK(ggml_type_for(*d) == g);
            CHECK(dtype_bits(*d) == 8 * ggml_traits(g).type_size);
        }
    }
    CHECK(ggml_plain_dtype(ggml_type::BF16) == dtype::BF16);
    CHECK_FALSE(ggml_plain_dtype(ggml_type::Q8_0));
    CHECK_FALSE(ggml_type_for(dtype::U16));
    CHECK_FALSE(ggml_type_for(dtype::F8_E4M3));
}
