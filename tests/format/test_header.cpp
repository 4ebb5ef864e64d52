// Tests for include/ringsafe/header.hpp: length prefix, parsing rules beyond
// the shared conformance files, error messages, lookups.
#include <catch2/catch.hpp>

#include <cstring>

#include "format/utf8.hpp"
#include "ringsafe/header.hpp"

using namespace ringsafe;

namespace {

// A header of `json` describing a file whose data section has `data` bytes.
header parse(const std::string& json, std::uint64_t data = 0) { return parse_header(json, 8 + json.size() + data); }

// The error kind and message of parsing `json` (data section of `data` bytes).
std::pair<std::string, std::string> failure(const std::string& json, std::uint64_t data = 0) {
    status st;
    auto h = parse_header(json, 8 + json.size() + data, {}, st);
    REQUIRE_FALSE(h);
    REQUIRE_FALSE(st.ok());
    return {std::string(error_kind(st.code)), st.message};
}

std::string kind_of(const std::string& json, std::uint64_t data = 0) { return failure(json, data).first; }

// "NAME":{F32 entry}
std::string f32(const std::string& name, std::uint64_t b, std::uint64_t e, const std::string& shape = "[1]") {
    std::string s = "\"";
    s.append(name).append("\":{\"dtype\":\"F32\",\"shape\":").append(shape).append(",\"data_offsets\":[");
    return s.append(std::to_string(b)).append(",").append(std::to_string(e)).append("]}");
}

// {a,b,...}
std::string object(std::initializer_list<std::string> items) {
    std::string s = "{";
    for (auto& i : items) s.append(s.size() > 1 ? "," : "").append(i);
    return s + '}';
}

}  // namespace

TEST_CASE("length prefix: little-endian N, checked in the reference's order") {
    std::byte p[8];
    encode_length_prefix(0x0102030405060708ull, p);
    CHECK(p[0] == std::byte{0x08});
    CHECK(p[7] == std::byte{0x01});
    encode_length_prefix(16, p);
    CHECK(parse_length_prefix(p, 24) == 16);
    CHECK_THROWS_WITH(parse_length_prefix(std::span(p, 7), 7), Catch::Contains("shorter than the 8-byte"));
    try {
        parse_length_prefix(p, 23);
        FAIL("accepted");
    } catch (const error& e) {
        CHECK(e.code() == errc::InvalidHeaderLength);
    }
    encode_length_prefix(~std::uint64_t{0}, p);  // 8 + N overflows: still InvalidHeaderLength
    parse_options no_cap{.max_header_size = ~std::uint64_t{0}};
    CHECK_THROWS_AS(parse_length_prefix(p, 100, no_cap), error);
    try {
        parse_length_prefix(p, 100, no_cap);
    } catch (const error& e) {
        CHECK(e.code() == errc::InvalidHeaderLength);
    }
    encode_length_prefix(101, p);  // above the cap wins over past-the-end
    try {
        parse_length_prefix(p, 50, parse_options{.max_header_size = 100});
    } catch (const error& e) {
        CHECK(e.code() == errc::HeaderTooLarge);
    }
}

TEST_CASE("strict UTF-8: overlong, surrogates and > U+10FFFF are refused") {
    using format::utf8_invalid_at;
    constexpr auto npos = std::string_view::npos;
    CHECK(utf8_invalid_at("") == npos);
    CHECK(utf8_invalid_at("\xC2\x80 \xDF\xBF \xE0\xA0\x80 \xEF\xBF\xBF \xF0\x90\x80\x80 \xF4\x8F\xBF\xBF") == npos);
    CHECK(utf8_invalid_at("\xED\x9F\xBF\xEE\x80\x80") == npos);  // U+D7FF, U+E000
    const std::pair<std::string, std::size_t> bad[] = {
        {"ab\xC0\xAF", 2},            // overlong '/'
        {"\xC1\xBF", 0},              // overlong
        {"x\xE0\x9F\xBF", 1},         // overlong 3-byte
        {"\xF0\x8F\xBF\xBF", 0},      // overlong 4-byte
        {"\xED\xA0\x80", 0},          // U+D800
        {"\xED\xBF\xBF", 0},          // U+DFFF
        {"\xF4\x90\x80\x80", 0},      // U+110000
        {"\xF5\x80\x80\x80", 0},      // never valid
        {"abc\x80", 3},               // lone continuation
        {"abc\xE2\x82", 3},           // truncated at the end
        {"\xE2\x28\xA1", 0},          // bad continuation
        {std::string(37, 'a') + "\xFF" + std::string(40, 'b'), 37},  // after the 16-byte fast path
        {std::string(32, 'a') + "\xC3", 32},
    };
    for (auto& [text, at] : bad) {
        INFO(text.size());
        CHECK(utf8_invalid_at(text) == at);
    }
    auto [kind, msg] = failure("{}" + std::string(20, ' ') + "\xFF" + std::string(5, ' '));
    CHECK(kind == "InvalidHeader");
    CHECK_THAT(msg, Catch::Contains("byte 22"));
}

TEST_CASE("JSON errors report InvalidHeaderDeserialization with the byte position") {
    auto [kind, msg] = failure(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"v":7})", 4);
    CHECK(kind == "InvalidHeaderDeserialization");
    CHECK_THAT(msg, Catch::Contains("at byte 59") && Catch::Contains("tensor 'v'"));
    CHECK_THAT(failure("{\"a\" 1}").second, Catch::Contains("at byte 5"));
    CHECK(kind_of("{}\f") == "InvalidHeaderDeserialization");
    CHECK(parse("\t\r\n {}\t\r\n ").tensors.empty());
}

TEST_CASE("numbers must be plain unsigned 64-bit integers") {
    for (const char* n : {"-0", "-1", "1.0", "1e0", "0.5", "18446744073709551616"}) {
        INFO(n);
        CHECK(kind_of(object({f32("w", 0, 4, std::string("[").append(n).append("]"))}), 4) == "InvalidHeaderDeserialization");
    }
    // The largest u64 is a number the parser takes; the layout check then refuses it.
    CHECK(kind_of(object({f32("w", 0, 4, "[18446744073709551615,0]")}), 4) == "TensorInvalidInfo");
    // Numbers beyond the f64 range are refused anywhere, as serde_json does.
    CHECK(kind_of(R"({"w":{"x":[[1e400]],"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4) ==
          "InvalidHeaderDeserialization");
    CHECK(kind_of(R"({"w":{"x":-1e400,"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4) ==
          "InvalidHeaderDeserialization");
    // Anything goes inside unknown fields, up to the nesting limit.
    CHECK(parse(R"({"w":{"x":[-0,1e9,1e-400,123456789012345678901234567890,-5,true,{"a":[null]}],"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":"again"}})", 4)
              .tensors.size() == 1);
}

TEST_CASE("nesting: 127 levels are accepted, 128 refused, like serde_json") {
    auto nested = [](int depth) {  // the top-level object and the entry count as two levels
        return "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":" + std::string(depth - 2, '[') +
               std::string(depth - 2, ']') + "}}";
    };
    CHECK(parse(nested(127), 4).tensors.size() == 1);
    auto [kind, msg] = failure(nested(128), 4);
    CHECK(kind == "InvalidHeaderDeserialization");
    CHECK_THAT(msg, Catch::Contains("127"));
}

TEST_CASE("dtype forms, entry forms, fields and __metadata__ rules") {
    CHECK(parse(R"({"w":{"dtype":{"BF16":null},"shape":[2],"data_offsets":[0,4]}})", 4).tensors[0].dtype == dtype::BF16);
    CHECK(parse(R"({"w":[{"U8":null},[3],[0,3]]})", 3).tensors[0].dtype == dtype::U8);
    CHECK(kind_of(R"({"w":{"dtype":{},"shape":[1],"data_offsets":[0,4]}})", 4) == "InvalidHeaderDeserialization");
    CHECK(kind_of(R"({"w":{"dtype":{"F32":null,"F16":null},"shape":[1],"data_offsets":[0,4]}})", 4) ==
          "InvalidHeaderDeserialization");
    CHECK(kind_of(R"({"w":{"dtype":{"F32":1},"shape":[1],"data_offsets":[0,4]}})", 4) == "InvalidHeaderDeserialization");
    // serde reads an empty map as unit too, so {"F32":{}} is F32; a non-empty one is not.
    CHECK(parse(R"({"w":[{"I16":{}},[2],[0,4]]})", 4).tensors[0].dtype == dtype::I16);
    CHECK(kind_of(R"({"w":[{"I16":{"a":null}},[2],[0,4]]})", 4) == "InvalidHeaderDeserialization");
    CHECK(kind_of(R"({"w":[{"I16":[]},[2],[0,4]]})", 4) == "InvalidHeaderDeserialization");
    CHECK(kind_of(R"({"w":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", 4) == "InvalidHeaderDeserialization");
    CHECK(kind_of(R"({"w":["F32",[1]]})", 4) == "InvalidHeaderDeserialization");
    CHECK_THAT(failure(R"({"w":{"dtype":"F32","shape":[1],"shape":[1],"data_offsets":[0,4]}})", 4).second,
               Catch::Contains("shape twice"));
    CHECK_THAT(failure(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4).second, Catch::Contains("no shape"));
    CHECK(kind_of(R"({"__metadata__":null,"__metadata__":null})") == "InvalidHeaderDeserialization");
    // Keys are compared after unescaping.
    CHECK(parse(R"({"__metadata\u005f_":{"k":"v"}})").metadata->at("k") == "v");
    CHECK(parse(R"({"w":{"d\u0074ype":"F\u00332","shape":[1],"data_offsets":[0,4]}})", 4).tensors[0].dtype == dtype::F32);
    auto m = parse(R"({"__metadata__":{"b":"1","a":"x\n\u00e9","b":"2"}})").metadata;
    REQUIRE(m);
    CHECK(*m == metadata_map{{"a", "x\n\xC3\xA9"}, {"b", "2"}});
    CHECK(parse(R"({"__metadata__":{}})").metadata == metadata_map{});
    CHECK_FALSE(parse(R"({"__metadata__":null})").metadata);
}

TEST_CASE("long escaped names and values arrive whole") {
    std::string raw(20000, 'n'), escaped;
    for (std::size_t i = 0; i < raw.size(); ++i) {
        if (i % 100 == 0) raw[i] = '"';
        escaped += raw[i] == '"' ? std::string("\\\"") : std::string(1, raw[i]);
    }
    header h = parse("{\"__metadata__\":{\"" + escaped + "\":\"" + escaped + "\"}," + f32(escaped, 0, 4) + "}", 4);
    REQUIRE(h.tensors.size() == 1);
    CHECK(h.tensors[0].name == raw);
    CHECK(h.metadata->at(raw) == raw);
}

TEST_CASE("duplicate names are an error naming the tensor") {
    auto [kind, msg] = failure(object({f32("w", 0, 4), f32("w", 4, 8)}), 8);
    CHECK(kind == "DuplicateTensorName");
    CHECK_THAT(msg, Catch::Contains("'w'"));
    // JSON errors anywhere come first, as the reference parses the whole header before any check.
    CHECK(kind_of(object({f32("w", 0, 4), f32("w", 4, 8), "\"x\":1"}), 8) == "InvalidHeaderDeserialization");
}

TEST_CASE("layout errors name the tensor and its offsets") {
    CHECK(failure(object({f32("w", 4, 8)}), 8).second ==
          "tensor 'w' data_offsets [4,8] does not start where the previous tensor ended (0)");
    CHECK_THAT(failure(object({f32("a", 0, 4), f32("b", 4, 2)}), 4).second,
               Catch::Contains("'b'") && Catch::Contains("[4,2]"));
    CHECK_THAT(failure(object({f32("w", 0, 8)}), 8).second, Catch::Contains("needs 4 bytes"));
    auto [kind, msg] = failure(object({f32("w", 0, 4)}), 5);
    CHECK(kind == "MetadataIncompleteBuffer");
    CHECK_THAT(msg, Catch::Contains("5 bytes"));
}

TEST_CASE("tensors come out in data order; ties by byte-wise name") {
    std::string json = object({f32("c", 4, 8), f32("z", 0, 0, "[0]"), f32("b", 0, 4), f32("a", 0, 0, "[0]"),
                               f32("\xC3\xA9", 8, 8, "[0,3]")});
    header h = parse(json, 8);
    std::vector<std::string> names;
    for (auto& t : h.tensors) names.push_back(t.name);
    CHECK(names == std::vector<std::string>{"a", "z", "b", "c", "\xC3\xA9"});
    CHECK(h.data_size == 8);
    CHECK(h.data_start() == 8 + json.size());
    CHECK(h.file_size() == 8 + json.size() + 8);
}

TEST_CASE("find, at and the name index") {
    header h = parse(object({f32("b", 4, 8), f32("a", 0, 4), f32("c", 8, 20, "[3]")}), 20);
    REQUIRE(h.by_name.size() == 3);
    CHECK(h.find("c")->begin == 8);
    CHECK(h.find("a") == &h.tensors[0]);
    CHECK(h.find("d") == nullptr);
    CHECK(h.find("") == nullptr);
    CHECK(h.at("b").end == 8);
    CHECK_THROWS_WITH(h.at("missing"), Catch::Contains("'missing'"));
    try {
        h.at("x");
    } catch (const error& e) {
        CHECK(e.code() == errc::TensorNotFound);
    }
    h.tensors.push_back(tensor_info{"aa", dtype::U8, {}, 20, 21});
    CHECK(h.find("aa") == &h.tensors.back());  // stale index: falls back to a scan
    h.build_name_index();
    CHECK(h.by_name == std::vector<std::uint32_t>{0, 3, 1, 2});
    CHECK(h.find("aa") == &h.tensors[3]);
}

TEST_CASE("build_name_index sorts any order, including sorted runs") {
    header h;
    for (int run = 0; run < 5; ++run)
        for (int i = 0; i < 300; ++i) h.tensors.push_back(tensor_info{std::to_string(i * 7 + run), dtype::U8, {}, 0, 0});
    h.tensors.push_back(tensor_info{"0", dtype::U8, {}, 0, 0});
    h.build_name_index();
    for (std::size_t i = 1; i < h.by_name.size(); ++i)
        CHECK(h.tensors[h.by_name[i - 1]].name <= h.tensors[h.by_name[i]].name);
    std::reverse(h.tensors.begin(), h.tensors.end());  // one run per element: the std::sort path
    h.build_name_index();
    CHECK(std::is_sorted(h.by_name.begin(), h.by_name.end(),
                         [&](auto a, auto b) { return h.tensors[a].name < h.tensors[b].name; }));
}

TEST_CASE("sizes: elements(), huge claimed data needs no memory") {
    CHECK(tensor_info{"s", dtype::F32, {}, 0, 4}.elements() == 1);
    CHECK(tensor_info{"m", dtype::F32, {2, 3, 4}, 0, 96}.elements() == 24);
    CHECK(tensor_info{"z", dtype::F32, {5, 0}, 0, 0}.elements() == 0);
    std::string json = R"({"huge":{"dtype":"U8","shape":[1125899906842624],"data_offsets":[0,1125899906842624]}})";
    header h = parse(json, std::uint64_t{1} << 50);
    CHECK(h.tensors[0].size() == std::uint64_t{1} << 50);
}

TEST_CASE("the non-throwing overload reports success and failure") {
    status st;
    st.code = errc::IoError;
    auto ok = parse_header("{}", 10, {}, st);
    CHECK(ok);
    CHECK(st.ok());
    auto bad = parse_header("{}", 11, {}, st);
    CHECK_FALSE(bad);
    CHECK(st.code == errc::MetadataIncompleteBuffer);
    CHECK_THROWS_AS(parse_header("{}", 11), error);
}

TEST_CASE("parse_file takes a whole file") {
    std::string json = object({f32("w", 0, 4)});
    std::vector<std::byte> file(8 + json.size() + 4);
    encode_length_prefix(json.size(), file.data());
    std::memcpy(file.data() + 8, json.data(), json.size());
    CHECK(parse_file(file).tensors.at(0).name == "w");
    CHECK_THROWS_AS(parse_file(std::span(file).first(5)), error);
}
