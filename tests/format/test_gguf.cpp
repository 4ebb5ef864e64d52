// include/ringsafe/gguf.hpp on files made here: value types and entries,
// ggml's checks that the corpus does not reach, the header-size limit, the
// incremental parser's answers (need, estimate), and the serializer's refusals.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include "ringsafe/gguf.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using gguf::value_type;

namespace {

// A GGUF file written field by field, so that any field can be wrong.
struct bytes_out {
    std::string s;
    bytes_out& u32(std::uint32_t v) { return le(v, 4); }
    bytes_out& u64(std::uint64_t v) { return le(v, 8); }
    bytes_out& str(std::string_view v) {
        u64(v.size());
        s.append(v);
        return *this;
    }
    bytes_out& le(std::uint64_t v, int n) {
        for (int i = 0; i < n; ++i) s.push_back(static_cast<char>(v >> (8 * i)));
        return *this;
    }
    bytes_out& preamble(std::uint64_t tensors, std::uint64_t kvs) {
        s.append("GGUF");
        return u32(3).u64(tensors).u64(kvs);
    }
    bytes_out& info(std::string_view name, std::initializer_list<std::uint64_t> ne, std::uint32_t type,
                    std::uint64_t offset) {
        str(name).u32(static_cast<std::uint32_t>(ne.size()));
        for (auto d : ne) u64(d);
        return u32(type).u64(offset);
    }
    bytes_out& pad_to(std::size_t n) {
        s.resize(std::max(s.size(), n), '\0');
        return *this;
    }
    std::span<const std::byte> span() const { return std::as_bytes(std::span(s.data(), s.size())); }
};

std::string kind(const std::function<void()>& f) {
    try {
        f();
    } catch (const error& e) {
        return std::string(e.kind());
    }
    return "accepted";
}

std::string parse_kind(const bytes_out& b, parse_options o = {}) {
    return kind([&] { gguf::parse(b.span(), 0, o); });
}

}  // namespace

TEST_CASE("value types: names as gguf-py spells them, element sizes") {
    for (std::uint32_t i = 0; i < gguf::value_type_count; ++i) {
        const auto t = static_cast<value_type>(i);
        CHECK(gguf::value_type_from_name(gguf::value_type_name(t)) == t);
    }
    CHECK(gguf::value_type_name(value_type::FLOAT64) == "FLOAT64");
    CHECK(gguf::value_type_name(static_cast<value_type>(13)).empty());
    CHECK_FALSE(gguf::value_type_from_name("uint32"));
    CHECK(gguf::value_type_size(value_type::UINT16) == 2);
    CHECK(gguf::value_type_size(value_type::BOOL) == 1);
    CHECK(gguf::value_type_size(value_type::STRING) == 0);
    CHECK(gguf::value_type_size(value_type::ARRAY) == 0);
}

TEST_CASE("metadata entries: made, read back by type, refused when the value does not fit") {
    using gguf::metadata_entry;
    CHECK(std::get<std::uint64_t>(metadata_entry::make("a", value_type::UINT8, std::uint64_t{255}).value()) == 255);
    CHECK(std::get<std::int64_t>(metadata_entry::make("a", value_type::INT16, std::int64_t{-32768}).value()) ==
          -32768);
    CHECK(std::get<double>(metadata_entry::make("a", value_type::FLOAT32, 0.1).value()) ==
          static_cast<double>(0.1f));
    CHECK(std::get<std::uint64_t>(metadata_entry::make("a", value_type::UINT64, ~0ull).value()) == ~0ull);
    CHECK(metadata_entry::make("a", value_type::UINT64, ~0ull).as_integer() == std::nullopt);
    CHECK(metadata_entry::make("a", value_type::UINT32, std::int64_t{7}).as_integer() == 7);
    CHECK(metadata_entry::make("a", value_type::STRING, std::string_view("x")).as_string() == "x");
    CHECK(kind([] { metadata_entry::make("a", value_type::UINT8, std::uint64_t{256}); }) == "InvalidArgument");
    CHECK(kind([] { metadata_entry::make("a", value_type::INT8, std::int64_t{128}); }) == "InvalidArgument");
    CHECK(kind([] { metadata_entry::make("a", value_type::UINT32, std::int64_t{-1}); }) == "InvalidArgument");
    CHECK(kind([] { metadata_entry::make("a", value_type::UINT32, std::string_view("1")); }) == "InvalidArgument");
    CHECK(kind([] { metadata_entry::make("a", value_type::ARRAY, std::uint64_t{1}); }) == "InvalidArgument");

    const std::vector<gguf::scalar> words{std::string_view("a"), std::string_view(""), std::string_view("bcd")};
    const auto arr = metadata_entry::make_array("w", value_type::STRING, words);
    CHECK(arr.count == 3);
    CHECK(arr.string_at(2) == "bcd");
    CHECK(arr.string_at(1).empty());
    CHECK(kind([&] { arr.string_at(3); }) == "InvalidArgument");
    CHECK(kind([&] { arr.value(3); }) == "InvalidArgument");
    const std::vector<gguf::scalar> flags{true, false};
    CHECK(std::get<bool>(metadata_entry::make_array("f", value_type::BOOL, flags).value(0)));
    CHECK(kind([&] { metadata_entry::make_array("x", value_type::ARRAY, flags); }) == "InvalidArgument");
    CHECK(kind([&] { metadata_entry::make_array("x", value_type::INT32, words); }) == "InvalidArgument");
}

TEST_CASE("a string value keeps every byte, a NUL too (ggml's C API would end it there)") {
    const std::string with_nul("ab\0cd", 5);
    const std::vector<gguf::metadata_entry> meta{gguf::metadata_entry::make("s", value_type::STRING, with_nul)};
    const std::string bytes = gguf::serialize(meta, {});
    const gguf::header h = gguf::parse(std::as_bytes(std::span(bytes.data(), bytes.size())));
    CHECK(h.find_key("s")->as_string() == with_nul);  // 5 bytes; ggml's gguf_get_val_str gives "ab"
}

TEST_CASE("ggml's checks that the corpus does not reach") {
    SECTION("tensor names equal up to a NUL are one name to ggml") {
        bytes_out b;
        b.preamble(2, 0).info(std::string("a\0x", 3), {4}, 0, 0).info(std::string("a\0y", 3), {4}, 0, 32);
        b.pad_to(160);
        CHECK(parse_kind(b) == "DuplicateTensor");
    }
    SECTION("a zero dimension anywhere: no elements, no bytes, no overflow") {
        bytes_out b;
        b.preamble(2, 0).info("z", {1ull << 40, 0, 1ull << 40}, 0, 0).info("w", {4}, 0, 0).pad_to(160);
        const gguf::header h = gguf::parse(b.span());
        CHECK(h.tensors[0].size() == 0);
        CHECK(h.tensors[0].shape == std::vector<std::uint64_t>{1ull << 40, 0, 1ull << 40});
        CHECK(h.tensors[1].begin == 0);
    }
    SECTION("an element count below INT64_MAX whose bytes overflow 64 bits") {
        bytes_out b;
        b.preamble(1, 0).info("big", {1ull << 62}, 28 /* F64 */, 0);
        CHECK(parse_kind(b) == "BadTensorInfo");
    }
    SECTION("the element count's limit is ggml's: INT64_MAX / ne[1] <= ne[0] fails") {
        bytes_out b;
        b.preamble(1, 0).info("t", {std::uint64_t(std::numeric_limits<std::int64_t>::max()), 1}, 24, 0);
        CHECK(parse_kind(b) == "BadTensorInfo");
    }
    SECTION("an unknown value type of a scalar, an array of arrays") {
        bytes_out b;
        b.preamble(0, 1).str("k").u32(13);
        CHECK(parse_kind(b) == "BadKV");
        bytes_out n;
        n.preamble(0, 1).str("k").u32(9).u32(9).u64(0);
        CHECK(parse_kind(n) == "BadKV");
    }
    SECTION("an array's count is checked before its elements are read") {
        bytes_out b;
        b.preamble(0, 1).str("k").u32(9).u32(4 /* UINT32 */).u64(1000).u32(1);
        CHECK(parse_kind(b) == "BadArray");
    }
    SECTION("no tensors: the data section starts where the metadata ends, unpadded") {
        bytes_out b;
        b.preamble(0, 1).str("k").u32(4).u32(7);
        const gguf::header h = gguf::parse(b.span());
        CHECK(h.data_offset == b.s.size());
        CHECK(h.data_size == 0);
        CHECK(h.info_end == b.s.size());
    }
    SECTION("a file shorter than the padded start of its data section is Truncated") {
        bytes_out b;
        b.preamble(1, 0).info("t", {0}, 0, 0);  // a zero-byte tensor, the padding missing
        CHECK(parse_kind(b) == "Truncated");
        b.pad_to(64);
        CHECK(parse_kind(b) == "accepted");
    }
}

TEST_CASE("max_header_size caps the header's bytes: HeaderTooLarge, before the bytes are read") {
    bytes_out b;
    b.preamble(0, 1).str("tokenizer.ggml.tokens").u32(9).u32(8).u64(100000);
    for (int i = 0; i < 100000; ++i) b.str("tok" + std::to_string(i));
    parse_options o;
    o.max_header_size = 4096;
    CHECK(parse_kind(b, o) == "HeaderTooLarge");
    o.max_header_size = b.s.size();
    CHECK(parse_kind(b, o) == "accepted");
    // A huge array's claim is refused at its count (the file holds the bytes, the limit does not).
    bytes_out big;
    big.preamble(0, 1).str("k").u32(9).u32(0).u64(1u << 29).pad_to((1u << 29) + 64);
    o.max_header_size = 1u << 20;
    gguf::parser p(big.s.size(), o);
    CHECK(kind([&] { p.feed(big.span().first(64)); }) == "HeaderTooLarge");
}

TEST_CASE("the incremental parser: need is the next field's end, the estimate extrapolates what it has seen") {
    bytes_out b;
    b.preamble(1, 3).str("general.name").u32(8).str("model");
    b.str("tokens").u32(9).u32(8).u64(10000);
    for (int i = 0; i < 10000; ++i) b.str("token_" + std::to_string(100000 + i));  // 12 bytes + 8
    b.str("types").u32(9).u32(5).u64(10000);
    for (int i = 0; i < 10000; ++i) b.u32(1);
    const std::size_t infos = b.s.size();
    b.info("w", {8}, 0, 0).pad_to(b.s.size() + 64);
    const std::uint64_t end = infos + 8 + 1 + 4 + 8 + 4 + 8;

    gguf::parser p(b.s.size());
    CHECK(p.feed(b.span().first(0)).need == 4);
    // 1000 strings in: the estimate covers the rest of the array at their average size.
    const std::size_t into = 24 + 8 + 12 + 4 + 8 + 5 + 8 + 6 + 4 + 12 + 1000 * 20 + 5;
    const gguf::progress a = p.feed(b.span().first(into));
    CHECK_FALSE(a.done);
    CHECK(a.need == into - 5 + 8);  // the length of the string being cut
    const std::uint64_t strings_end = 24 + 8 + 12 + 4 + 8 + 5 + 8 + 6 + 4 + 12 + 10000 * 20;
    CHECK(a.estimate >= strings_end);
    CHECK(a.estimate < strings_end + 2000);
    // Inside the fixed-size array: its end is known exactly.
    const gguf::progress c = p.feed(b.span().first(strings_end + 8 + 5 + 4 + 12 + 400));
    CHECK(c.need == strings_end + 8 + 5 + 4 + 12 + 404);
    CHECK(c.estimate >= infos);
    CHECK(c.estimate < end + 100);
    CHECK(p.feed(b.span().first(end - 1)).need == end);
    CHECK(p.feed(b.span()).done);
    const gguf::header h = p.finish();
    CHECK(h.info_end == end);
    CHECK(h.find_key("tokens")->string_at(9999) == "token_109999");
    CHECK(std::get<std::int64_t>(h.find_key("types")->value(9999)) == 1);
    CHECK(kind([&] { p.finish(); }) == "InvalidArgument");
}

TEST_CASE("the parser refuses a prefix that shrinks, a finish too early, a feed after a failure") {
    bytes_out b;
    b.preamble(0, 0);
    gguf::parser p(b.s.size() + 100);
    p.feed(b.span().first(10));
    CHECK(kind([&] { p.feed(b.span().first(5)); }) == "InvalidArgument");
    gguf::parser q(b.s.size() + 100);
    q.feed(b.span().first(10));
    CHECK(kind([&] { q.finish(); }) == "InvalidArgument");
    bytes_out bad;
    bad.s = "GGUX";
    gguf::parser r(4);
    CHECK(kind([&] { r.feed(bad.span()); }) == "BadMagic");
    CHECK(kind([&] { r.feed(bad.span()); }) == "InvalidArgument");
    CHECK(kind([&] { gguf::parse(b.span().first(10), 100); }) == "InvalidArgument");  // more of the header needed
}

TEST_CASE("the magic bytes tell the format") {
    CHECK(gguf::is_gguf(std::as_bytes(std::span("GGUF\3\0\0\0", 8))));
    CHECK_FALSE(gguf::is_gguf(std::as_bytes(std::span("GGU", 3))));
    CHECK_FALSE(gguf::is_gguf(std::as_bytes(std::span("gguf", 4))));
}

TEST_CASE("the serializer writes the running padded offsets and refuses what the reader would") {
    using gguf::tensor_record;
    const std::vector<gguf::metadata_entry> meta{
        gguf::metadata_entry::make("general.alignment", value_type::UINT32, std::uint64_t{64})};
    const std::vector<tensor_record> recs{{"a", ggml_type::F32, {3}}, {"b", ggml_type::Q8_0, {32, 2}},
                                          {"s", ggml_type::F16, {}}};
    const std::string out = gguf::serialize(meta, recs, 64);
    CHECK(out.size() % 64 == 0);
    std::string file = out + std::string(64 + 128 + 64, '\0');  // 12, 68 and 2 bytes, each padded to 64
    const gguf::header h = gguf::parse(std::as_bytes(std::span(file.data(), file.size())));
    CHECK(h.tensors[1].begin == 64);
    CHECK(h.tensors[2].begin == 192);
    CHECK(h.tensors[2].shape.empty());
    CHECK(h.tensors[2].size() == 2);
    CHECK(h.data_size == 256);

    CHECK(kind([&] { gguf::serialize(meta, recs, 32); }) == "InvalidArgument");  // general.alignment disagrees
    CHECK(kind([&] { gguf::serialize({}, recs, 48); }) == "BadAlignment");
    CHECK(kind([&] { gguf::serialize({}, recs, 32, 1); }) == "BadVersion");
    const std::vector<tensor_record> five{{"t", ggml_type::F32, {1, 1, 1, 1, 1}}};
    CHECK(kind([&] { gguf::serialize({}, five); }) == "BadTensorInfo");
    const std::vector<tensor_record> long_name{{std::string(64, 'n'), ggml_type::F32, {1}}};
    CHECK(kind([&] { gguf::serialize({}, long_name); }) == "BadTensorInfo");
    const std::vector<tensor_record> block{{"q", ggml_type::Q4_K, {255}}};
    CHECK(kind([&] { gguf::serialize({}, block); }) == "BadTensorInfo");
    const std::vector<tensor_record> twice{{"t", ggml_type::F32, {1}}, {"t", ggml_type::F16, {1}}};
    CHECK(kind([&] { gguf::serialize({}, twice); }) == "DuplicateTensor");
    std::vector<gguf::metadata_entry> dup{gguf::metadata_entry::make("k", value_type::BOOL, true),
                                          gguf::metadata_entry::make("k", value_type::BOOL, false)};
    CHECK(kind([&] { gguf::serialize(dup, {}); }) == "DuplicateKey");
    dup.pop_back();
    dup[0].data += 'x';  // two bytes for one BOOL
    CHECK(kind([&] { gguf::serialize(dup, {}); }) == "InvalidArgument");
    dup[0].key.clear();
    CHECK(kind([&] { gguf::serialize(dup, {}); }) == "BadKV");
}
