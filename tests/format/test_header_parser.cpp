// header_parser: a header fed in pieces of any size gives what parse_header()
// gives for the whole, errors and their order included; utf8_stream agrees
// with utf8_invalid_at() across every cut.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "format/utf8.hpp"
#include "ringsafe/header.hpp"

using namespace ringsafe;

namespace {

struct outcome {
    bool ok = false;
    std::string kind, message;
    std::vector<std::string> names;
    std::vector<std::vector<std::uint64_t>> shapes;
    std::vector<std::uint64_t> offsets;
    std::string metadata;
};

outcome describe(const std::optional<header>& h, const status& st) {
    outcome o;
    o.ok = h.has_value();
    if (!h) {
        o.kind = error_kind(st.code);
        o.message = st.message;
        return o;
    }
    for (auto& t : h->tensors) {
        o.names.push_back(t.name);
        o.shapes.push_back(t.shape);
        o.offsets.push_back(t.begin), o.offsets.push_back(t.end);
    }
    if (h->metadata)
        for (auto& [k, v] : *h->metadata) o.metadata += k + "=" + v + ";";
    return o;
}

// The header fed in pieces of `piece` bytes, stopping where feed() says so.
outcome in_pieces(const std::string& json, std::uint64_t file_size, std::size_t piece) {
    header_parser p(json.size(), file_size);
    for (std::size_t at = 0; at < json.size(); at += piece)
        if (!p.feed(std::string_view(json).substr(at, piece))) break;
    status st;
    auto h = p.finish(st);
    return describe(h, st);
}

void check_pieces_agree(const std::string& json, std::uint64_t data) {
    const std::uint64_t file_size = 8 + json.size() + data;
    status st;
    auto whole = parse_header(json, file_size, {}, st);
    const outcome expect = describe(whole, st);
    for (std::size_t piece : {1, 2, 3, 5, 7, 16, 64}) {
        INFO(json << "\npieces of " << piece);
        const outcome got = in_pieces(json, file_size, piece);
        CHECK(got.ok == expect.ok);
        CHECK(got.kind == expect.kind);
        CHECK(got.message == expect.message);
        CHECK(got.names == expect.names);
        CHECK(got.shapes == expect.shapes);
        CHECK(got.offsets == expect.offsets);
        CHECK(got.metadata == expect.metadata);
    }
}

}  // namespace

TEST_CASE("utf8_stream finds what utf8_invalid_at finds, across every cut") {
    const std::string texts[] = {
        "",
        "plain ascii text that is longer than sixteen bytes",
        "\xC2\x80 \xDF\xBF \xE0\xA0\x80 \xEF\xBF\xBF \xF0\x90\x80\x80 \xF4\x8F\xBF\xBF",
        "ab\xC0\xAF", "x\xE0\x9F\xBF", "\xF0\x8F\xBF\xBF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
        "\xF5\x80\x80\x80", "abc\x80", "abc\xE2\x82", "\xE2\x28\xA1", "\xF0\x90\x80", "\xF0\x90\x80\x41",
        "\xE2\x82\xAC\xE2\x82", "caf\xC3\xA9 \xC3", std::string(37, 'a') + "\xFF" + std::string(40, 'b'),
    };
    for (const std::string& t : texts) {
        const std::size_t at = format::utf8_invalid_at(t);
        const std::uint64_t expect = at == std::string_view::npos ? format::utf8_stream::valid : at;
        for (std::size_t cut = 0; cut <= t.size(); ++cut) {
            INFO(t.size() << " bytes cut at " << cut);
            format::utf8_stream s;
            s.feed(std::string_view(t).substr(0, cut));
            s.feed(std::string_view(t).substr(cut));
            CHECK(s.finish() == expect);
        }
        format::utf8_stream bytewise;
        for (char c : t) bytewise.feed(std::string_view(&c, 1));
        CHECK(bytewise.finish() == expect);
    }
}

TEST_CASE("header_parser in pieces agrees with parse_header on values, errors and messages") {
    auto f32 = [](const std::string& name, std::uint64_t b, std::uint64_t e, const std::string& shape = "[1]") {
        return "\"" + name + "\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(b) +
               "," + std::to_string(e) + "]}";
    };
    const std::pair<std::string, std::uint64_t> cases[] = {
        {"{" + f32("w", 0, 4) + "," + f32("long.name.with.\\u00e9scapes.\\\"and\\\".more", 4, 8) + "}", 8},
        {R"({"__metadata__":{"format":"pt","k\u00e9":"v\n"},"a":["BF16",[2,3,4,5,6,7],[0,720]]})", 720},
        {"{" + f32("w", 0, 4, "[18446744073709551615,0]") + "}", 4},          // layout error
        {"{" + f32("w", 0, 4, "[-0]") + "}", 4},                             // number split over pieces
        {"{" + f32("w", 0, 4, "[18446744073709551616]") + "}", 4},           // too big
        {R"({"w":{"x":[[1e400]],"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4},
        {R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"v":7})", 4},
        {"{\"a\" 1}", 0},
        {"{}   x  ", 0},                                                    // data after the object
        {"{\"w\":{\"dtype\":\"F32\"", 0},                                    // ends early
        {"{}" + std::string(20, ' ') + "\xFF" + std::string(5, ' '), 0},    // UTF-8
        {"{\"a\" 1}" + std::string(30, ' ') + "\xC3", 0},                  // JSON error first, UTF-8 wins
        {"{\"\xC3\xA9t\xC3\xA9\":[\"U8\",[1],[0,1]]}", 1},                   // multi-byte names cut anywhere
        {std::string(128, '[') + std::string(128, ']'), 0},                 // nesting
        {"{" + f32("a", 0, 4) + "," + f32("a", 4, 8) + "}", 8},               // duplicate
        {"{" + f32("b", 4, 8) + "," + f32("a", 0, 4) + "}", 8},               // data order
    };
    for (auto& [json, data] : cases) check_pieces_agree(json, data);
}

TEST_CASE("header_parser refuses a wrong N, extra bytes and an early finish") {
    CHECK_THROWS_AS(header_parser(100, 50), error);
    try {
        header_parser(200, 1000, parse_options{.max_header_size = 100});
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.kind() == std::string("HeaderTooLarge"));
    }
    const std::string json = "{}      ";
    header_parser extra(json.size(), 8 + json.size());
    CHECK(extra.feed(json));
    CHECK_FALSE(extra.feed(" "));
    status st;
    CHECK_FALSE(extra.finish(st));
    CHECK(error_kind(st.code) == std::string("InvalidArgument"));

    header_parser early(json.size(), 8 + json.size());
    CHECK(early.feed("{}"));
    CHECK_FALSE(early.finish(st));
    CHECK_THAT(st.message, Catch::Contains("2 of 8"));

    header_parser fine(json.size(), 8 + json.size());
    CHECK(fine.feed(json.substr(0, 3)));
    CHECK(fine.feed(json.substr(3)));
    CHECK(fine.finish().tensors.empty());
}

TEST_CASE("a header's table reserves room instead of growing by copies") {
    // 1000 entries of at least min-entry size: no reallocation while parsing.
    std::string json = "{";
    for (int i = 0; i < 1000; ++i)
        json += (i ? "," : "") + std::string("\"t") + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" +
                std::to_string(i) + "," + std::to_string(i + 1) + "]}";
    json += "}";
    header h = parse_header(json, 8 + json.size() + 1000);
    CHECK(h.tensors.size() == 1000);
    CHECK(h.tensors.capacity() >= json.size() / 50);
}
