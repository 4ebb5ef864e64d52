// The GGUF conformance cases through gguf::parse and gguf::parser: every
// field of expected.jsonl for the valid files (metadata values exact, each
// tensor's record and the sha256 of its bytes), ggml's error kind for the
// invalid ones, the same answer for every way of cutting a file into pieces,
// and the serializer's byte-exact round trip of every valid header.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <cstring>

#include "gguf_cases.hpp"
#include "ringsafe/gguf.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace json = boost::json;

namespace {

json::value element_json(const gguf::metadata_entry& e, std::uint64_t i) {
    const gguf::scalar v = e.value(i);
    if (auto* u = std::get_if<std::uint64_t>(&v)) return *u;
    if (auto* s = std::get_if<std::int64_t>(&v)) return *s;
    if (auto* d = std::get_if<double>(&v)) return *d;
    if (auto* b = std::get_if<bool>(&v)) return *b;
    return json::string(std::get<std::string_view>(v));
}

json::value entry_json(const gguf::metadata_entry& e) {
    if (!e.is_array()) return element_json(e, 0);
    json::array a;
    for (std::uint64_t i = 0; i < e.count; ++i) a.push_back(element_json(e, i));
    return a;
}

void check_valid(const gguf_case& c) {
    INFO(c.file);
    const auto bytes = read_file(c.path);
    gguf::header h;
    try {
        h = gguf::parse(bytes);
    } catch (const error& e) {
        FAIL("refused: " << e.kind() << ": " << e.what());
    }
    CHECK(h.version == c.version);
    CHECK(h.alignment == c.alignment);
    CHECK(h.data_offset == c.data_offset);
    CHECK(h.data_offset + h.data_size == bytes.size());  // every corpus file ends with its data section
    REQUIRE(h.metadata.size() == c.metadata.size());
    for (std::size_t i = 0; i < c.metadata.size(); ++i) {
        const gguf::metadata_entry& e = h.metadata[i];
        const gguf_expected_entry& x = c.metadata[i];
        INFO("metadata " << i << " '" << x.key << "'");
        CHECK(e.key == x.key);
        CHECK(gguf::value_type_name(e.type) == x.type);
        if (x.element_type) CHECK(gguf::value_type_name(e.element_type) == *x.element_type);
        const json::value got = entry_json(e);
        INFO("got " << json::serialize(got) << ", expected " << json::serialize(x.value));
        CHECK(gguf_value_matches(got, x.value));
        CHECK(h.find_key(x.key) == &e);
    }
    REQUIRE(h.tensors.size() == c.tensors.size());
    for (std::size_t i = 0; i < c.tensors.size(); ++i) {
        const tensor_info& t = h.tensors[i];
        const gguf_expected_tensor& x = c.tensors[i];
        INFO("tensor " << i << " '" << x.name << "'");
        CHECK(t.name == x.name);
        CHECK(ggml_type_name(t.ggml) == x.type);
        CHECK(static_cast<std::uint32_t>(t.ggml) == x.type_id);
        CHECK(t.shape == x.shape);
        CHECK(gguf::ne_of(t) == x.ne);
        CHECK(t.begin == x.offset);
        CHECK(t.size() == x.nbytes);
        CHECK(t.quantized() == ggml_is_quantized(t.ggml));
        CHECK(t.dtype == ggml_plain_dtype(t.ggml).value_or(dtype::U8));
        REQUIRE(h.data_offset + t.end <= bytes.size());
        CHECK(sha256_hex(std::span(bytes).subspan(h.data_offset + t.begin, t.size())) == x.sha256);
        CHECK(h.find(x.name) == &t);
    }
    const auto split = h.split();
    REQUIRE(split.has_value() == c.split.has_value());
    if (split) {
        CHECK(split->no == c.split->no);
        CHECK(split->count == c.split->count);
        CHECK(split->tensors_count == c.split->tensors_count);
    }
}

void check_invalid(const gguf_case& c) {
    INFO(c.file << " (expected " << c.error_kind << ")");
    const auto bytes = read_file(c.path);
    try {
        gguf::parse(bytes);
        FAIL("accepted");
    } catch (const error& e) {
        INFO(e.what());
        CHECK(e.kind() == c.error_kind);
        CHECK(e.message().size() > 20);
    }
    status st;
    CHECK_FALSE(gguf::parse(bytes, 0, {}, st));
    CHECK(error_kind(st.code) == c.error_kind);
}

std::vector<std::string> gguf_files(const std::filesystem::path& dir) {
    std::vector<std::string> names;
    for (auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".gguf") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

void check_folder(const char* folder, std::size_t at_least, bool ok, void (*check)(const gguf_case&)) {
    const auto dir = gguf_conformance_dir() / folder;
    const auto cases = load_gguf_cases(dir);
    REQUIRE(cases.size() >= at_least);
    std::vector<std::string> listed;
    for (auto& c : cases) listed.push_back(c.file);
    std::sort(listed.begin(), listed.end());
    CHECK(listed == gguf_files(dir));  // one line per file
    for (auto& c : cases) {
        REQUIRE(c.ok == ok);
        check(c);
    }
}

// What a parse ends in: the kind, or "ok" and the header's records.
std::string outcome(const std::function<gguf::header()>& parse) {
    try {
        const gguf::header h = parse();
        std::string s = "ok " + std::to_string(h.version) + " " + std::to_string(h.alignment) + " " +
                        std::to_string(h.data_offset) + " " + std::to_string(h.data_size);
        for (auto& e : h.metadata) s += " " + e.key + "=" + std::to_string(e.count) + ":" + e.data;
        for (auto& t : h.tensors) s += " " + t.name + "@" + std::to_string(t.begin) + "+" + std::to_string(t.size());
        return s;
    } catch (const error& e) {
        return std::string(e.kind()) + ": " + e.message();
    }
}

// Feeds `bytes` through one parser in prefixes growing by `step` (the last
// one whole), checking each answer; returns the outcome.
std::string fed_in_steps(std::span<const std::byte> bytes, std::size_t step) {
    return outcome([&] {
        gguf::parser p(bytes.size());
        for (std::size_t have = std::min(step, bytes.size());; have = std::min(have + step, bytes.size())) {
            const gguf::progress pr = p.feed(bytes.first(have));
            if (pr.done) return p.finish();
            REQUIRE(have < bytes.size());  // a whole file always ends the parse
            CHECK(pr.need > have);
            CHECK(pr.need <= pr.estimate);
            CHECK(pr.estimate <= bytes.size());
        }
    });
}

}  // namespace

TEST_CASE("valid GGUF conformance files parse to ggml's version, metadata, records and bytes") {
    check_folder("valid", 70, true, check_valid);
}

TEST_CASE("invalid GGUF conformance files fail with ggml's error kind") {
    check_folder("invalid", 50, false, check_invalid);
}

TEST_CASE("a GGUF file fed in pieces of every size gets the verdict and header of the whole") {
    int files = 0;
    for (const gguf_case& c : all_gguf_cases()) {
        INFO(c.file);
        const auto bytes = read_file(c.path);
        const std::string whole = outcome([&] { return gguf::parse(bytes); });
        // The header's bytes bound the useful steps: past them a step is the whole.
        std::size_t header_bytes = bytes.size();
        try {
            header_bytes = static_cast<std::size_t>(gguf::parse(bytes).info_end);
        } catch (const error&) {
        }
        for (std::size_t step = 1; step <= header_bytes + 1; ++step) {
            INFO("pieces of " << step);
            REQUIRE(fed_in_steps(bytes, step) == whole);
        }
        // Cut once at every offset: a prefix, then the whole file.
        for (std::size_t cut = 0; cut <= std::min(bytes.size(), header_bytes + 1); ++cut) {
            INFO("cut at " << cut);
            const std::string got = outcome([&] {
                gguf::parser p(bytes.size());
                if (p.feed(std::span(bytes).first(cut)).done) return p.finish();
                const gguf::progress all = p.feed(bytes);  // throws the verdict, if any
                REQUIRE(all.done);
                return p.finish();
            });
            REQUIRE(got == whole);
        }
        ++files;
    }
    CHECK(files >= 120);
}

TEST_CASE("every valid GGUF header serializes back to its exact bytes") {
    for (const gguf_case& c : load_gguf_cases(gguf_conformance_dir() / "valid")) {
        INFO(c.file);
        const auto bytes = read_file(c.path);
        const gguf::header h = gguf::parse(bytes);
        const auto records = gguf::records_of(h);
        const std::string out = gguf::serialize(h.metadata, records, h.alignment, h.version);
        CHECK(out.size() == h.data_offset);
        CHECK(gguf::serialized_size(h.metadata, records, h.alignment) == out.size());
        REQUIRE(out.size() <= bytes.size());
        CHECK(std::memcmp(out.data(), bytes.data(), out.size()) == 0);
        // And parses to the same header.
        std::vector<std::byte> again(bytes.begin(), bytes.end());
        std::memcpy(again.data(), out.data(), out.size());
        CHECK(outcome([&] { return gguf::parse(again); }) == outcome([&] { return h; }));
    }
}

TEST_CASE("the corpus's quirks: what ringsafe reports where ggml and gguf-py differ") {
    const auto dir = gguf_conformance_dir() / "valid";
    // A BOOL byte of 2 reads as true (ggml tests != 0) and keeps its byte.
    const gguf::header b = gguf::parse(read_file(dir / "kv_bool_byte2.gguf"));
    const gguf::metadata_entry* e = nullptr;
    for (auto& m : b.metadata)
        if (m.type == gguf::value_type::BOOL) e = &m;
    REQUIRE(e);
    CHECK(std::get<bool>(e->value()) == true);
    CHECK(e->data == std::string(1, '\x02'));
    // An empty STRING array keeps its element type (gguf-py keeps none).
    const gguf::header s = gguf::parse(read_file(dir / "kv_arr_empty_string.gguf"));
    bool empty_array = false;
    for (auto& m : s.metadata)
        if (m.is_array() && m.count == 0) {
            empty_array = true;
            CHECK(m.element_type == gguf::value_type::STRING);
            CHECK(m.offsets.size() == 1);
        }
    CHECK(empty_array);
    // Q8_1 blocks are 36 bytes as ggml has them (gguf-py 0.19.0 says 40).
    CHECK(gguf::parse(read_file(dir / "type_Q8_1.gguf")).tensors.at(0).size() == 144);
    // Q2_0 (id 42), unknown to gguf-py 0.19.0, is read.
    CHECK(gguf::parse(read_file(dir / "type_Q2_0.gguf")).tensors.at(0).ggml == ggml_type::Q2_0);
}
