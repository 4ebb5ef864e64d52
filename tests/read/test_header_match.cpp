// read::header_matches: a shard's bytes as they are now against the header the
// reader parsed, over an in-memory source: the same bytes match; a change of
// any record (a dtype, a shape, an offset, a name, the metadata), of the
// header's length, or bytes that no longer parse, do not; nor do bytes too
// short or a shard that does not exist.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "memory_source.hpp"
#include "read/header_match.hpp"
#include "ringsafe/reader.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

// A safetensors file of `json` (padded with spaces to `pad`, 0: a multiple of 8)
// and `data` zero bytes.
std::vector<std::byte> file_of(std::string json, std::size_t data, std::size_t pad = 0) {
    const std::size_t n = pad ? pad : (json.size() + 7) / 8 * 8;
    json.resize(n, ' ');
    std::vector<std::byte> out(8 + n + data);
    for (int b = 0; b < 8; ++b) out[b] = static_cast<std::byte>(n >> (8 * b));
    std::memcpy(out.data() + 8, json.data(), n);
    return out;
}

const std::string parsed_json =
    R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
    R"("b":{"dtype":"I8","shape":[4],"data_offsets":[16,20]}})";

// The same length as parsed_json, with the header padded alike, unless said.
std::vector<std::byte> variant(const std::string& from, const std::string& to, std::size_t pad = 0) {
    std::string json = parsed_json;
    const auto at = json.find(from);
    REQUIRE(at != std::string::npos);
    json.replace(at, from.size(), to);
    return file_of(json, 20, pad ? pad : (parsed_json.size() + 7) / 8 * 8);
}

reader open_bytes(const std::vector<std::byte>& bytes) {
    return reader::from_source(std::make_unique<memory_source>("mem.safetensors", bytes));
}

}  // namespace

TEST_CASE("header_matches: the bytes the reader parsed match") {
    const auto bytes = file_of(parsed_json, 20);
    const reader r = open_bytes(bytes);
    CHECK(read::header_matches(r, 0, bytes));
    // Only the header is compared: the data section may differ or be cut off.
    auto changed_data = bytes;
    changed_data.back() = std::byte{0x7f};
    CHECK(read::header_matches(r, 0, changed_data));
    CHECK(read::header_matches(r, 0, std::span(bytes).first(r.shards()[0].data_start)));
}

TEST_CASE("header_matches: any changed record, or the metadata, does not match") {
    const reader r = open_bytes(file_of(parsed_json, 20));
    CHECK_FALSE(read::header_matches(r, 0, variant(R"("dtype":"F32")", R"("dtype":"I32")")));  // a dtype
    CHECK_FALSE(read::header_matches(r, 0, variant("[2,2]", "[1,4]")));                          // a shape
    CHECK_FALSE(read::header_matches(r, 0, variant("[16,20]", "[16,19]")));                      // an offset
    CHECK_FALSE(read::header_matches(r, 0, variant(R"("b":)", R"("c":)")));                      // a name
    CHECK_FALSE(read::header_matches(r, 0, variant(R"("pt")", R"("np")")));                      // the metadata
}

TEST_CASE("header_matches: another length, bytes that do not parse, too few bytes, no such shard") {
    const auto bytes = file_of(parsed_json, 20);
    const reader r = open_bytes(bytes);
    const std::size_t n = (parsed_json.size() + 7) / 8 * 8;
    // The same header padded 8 bytes longer: its data section starts elsewhere.
    CHECK_FALSE(read::header_matches(r, 0, file_of(parsed_json, 20, n + 8)));
    // Not JSON any more, at the same length.
    CHECK_FALSE(read::header_matches(r, 0, variant(R"({"__metadata__")", R"(["__metadata__")")));
    // A length prefix past the file.
    auto huge = bytes;
    huge[7] = std::byte{0x01};
    CHECK_FALSE(read::header_matches(r, 0, huge));
    CHECK_FALSE(read::header_matches(r, 0, std::span(bytes).first(r.shards()[0].data_start - 1)));
    CHECK_FALSE(read::header_matches(r, 0, std::span<const std::byte>()));
    CHECK_FALSE(read::header_matches(r, 1, bytes));
}
