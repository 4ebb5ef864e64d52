// Tests for the serialization half of include/ringsafe/header.hpp.
#include <catch2/catch.hpp>

#include <algorithm>

#include "ringsafe/header.hpp"

using namespace ringsafe;

TEST_CASE("compact JSON, __metadata__ first, padded with spaces to a multiple of 8") {
    std::vector<tensor_entry> t{{"w", dtype::F32, {2, 3}, 0, 24}, {"s", dtype::U8, {}, 24, 25}};
    metadata_map m{{"format", "pt"}};
    std::string expect = R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                         R"("s":{"dtype":"U8","shape":[],"data_offsets":[24,25]}})";
    CHECK(serialized_json_size(t, &m) == expect.size());
    std::string out = serialize_header(t, &m);
    CHECK(out.size() % 8 == 0);
    CHECK(out.substr(0, expect.size()) == expect);
    CHECK(out.find_first_not_of(' ', expect.size()) == std::string::npos);
    CHECK(serialize_header({}, nullptr) == "{}      ");
    metadata_map empty;
    CHECK(serialize_header({}, &empty) == "{\"__metadata__\":{}}     ");
}

TEST_CASE("strings are escaped like serde_json") {
    std::string name = std::string("q\"b\\n\nt\tr\rb\bf\f") + '\x01' + '\x1f' + "\x7f/\xC3\xA9";
    std::vector<tensor_entry> t{{name, dtype::BOOL, {0}, 0, 0}};
    std::string out = serialize_header(t, nullptr);
    CHECK(out.rfind(R"({"q\"b\\n\nt\tr\rb\bf\f\u0001\u001f)" "\x7f/\xC3\xA9" R"(":{"dtype":"BOOL")", 0) == 0);
    CHECK(serialized_json_size(t, nullptr) == out.find_last_not_of(' ') + 1);
    // And the parser reads it back.
    header h = parse_header(out, 8 + out.size());
    CHECK(h.tensors.at(0).name == name);
}

TEST_CASE("pad_to pads exactly or throws ReservationExceeded") {
    std::vector<tensor_entry> t{{"w", dtype::F16, {4}, 0, 8}};
    auto json_size = serialized_json_size(t, nullptr);
    std::string out = serialize_header(t, nullptr, {.pad_to = 1000});
    CHECK(out.size() == 1000);
    CHECK(serialize_header(t, nullptr, {.pad_to = json_size}).size() == json_size);
    try {
        serialize_header(t, nullptr, {.pad_to = json_size - 1});
        FAIL("no throw");
    } catch (const error& e) {
        CHECK(e.code() == errc::ReservationExceeded);
    }
}

TEST_CASE("round trip: serialize, parse, same entries") {
    std::vector<tensor_entry> t;
    std::uint64_t off = 0;
    for (int i = 0; i < 50; ++i) {
        dtype d = static_cast<dtype>(i % dtype_count);
        std::uint64_t n = dtype_bits(d) < 8 ? 8 : 3;
        std::uint64_t bytes = n * dtype_bits(d) / 8;
        t.push_back({"layer." + std::to_string(i) + ".weight", d, {n}, off, off + bytes});
        off += bytes;
    }
    metadata_map m{{"a", "1"}, {"b", "\xE2\x82\xAC"}};
    std::string json = serialize_header(t, &m);
    header h = parse_header(json, 8 + json.size() + off);
    REQUIRE(h.tensors.size() == t.size());
    for (std::size_t i = 0; i < t.size(); ++i) {
        CHECK(h.tensors[i].name == t[i].name);
        CHECK(h.tensors[i].dtype == t[i].dtype);
        CHECK(h.tensors[i].shape == t[i].shape);
        CHECK(h.tensors[i].begin == t[i].begin);
    }
    CHECK(h.metadata == m);
}

TEST_CASE("reference_writer_order: dtype descending, then byte-wise name") {
    std::vector<tensor_entry> t{{"b", dtype::U8, {}, 0, 0},  {"a", dtype::U8, {}, 0, 0}, {"z", dtype::U64, {}, 0, 0},
                                {"c", dtype::BOOL, {}, 0, 0}, {"\xC3\xA9", dtype::U8, {}, 0, 0}, {"Z", dtype::F32, {}, 0, 0}};
    std::sort(t.begin(), t.end(), reference_writer_order);
    std::vector<std::string> names;
    for (auto& e : t) names.push_back(e.name);
    CHECK(names == std::vector<std::string>{"z", "Z", "a", "b", "\xC3\xA9", "c"});
}
