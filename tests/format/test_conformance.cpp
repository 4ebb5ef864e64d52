// The shared conformance cases: every field of expected.jsonl against
// parse_file(), byte-exact serialization of the reference writer's files,
// and ringsafe's named deviations.
#include <catch2/catch.hpp>

#include <algorithm>

#include "conformance_cases.hpp"
#include "ringsafe/header.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

std::string metadata_text(const std::optional<metadata_map>& m) {
    if (!m) return "null";
    std::string s = "{";
    for (auto& [k, v] : *m) s += k + "=" + v + ";";
    return s + "}";
}

void check_valid(const expected_case& c) {
    INFO(c.file);
    auto bytes = read_file(c.path);
    header h;
    try {
        h = parse_file(bytes);
    } catch (const error& e) {
        const deviation* d = find_deviation(c.file);
        INFO("ringsafe refused it: " << e.kind() << ": " << e.what());
        REQUIRE(d != nullptr);
        CHECK(e.kind() == d->error_kind);
        return;
    }
    CHECK(find_deviation(c.file) == nullptr);  // a listed deviation must really deviate
    REQUIRE(h.tensors.size() == c.tensors.size());
    for (std::size_t i = 0; i < c.tensors.size(); ++i) {
        const tensor_info& t = h.tensors[i];
        const expected_tensor& e = c.tensors[i];
        INFO("tensor " << i << " '" << e.name << "'");
        CHECK(t.name == e.name);
        CHECK(dtype_name(t.dtype) == e.dtype);
        CHECK(t.shape == e.shape);
        CHECK(t.begin == e.begin);
        CHECK(t.end == e.end);
        REQUIRE(h.data_start() + t.end <= bytes.size());
        CHECK(sha256_hex(std::span(bytes).subspan(h.data_start() + t.begin, t.size())) == e.sha256);
        CHECK(h.find(e.name) == &t);
    }
    CHECK(metadata_text(h.metadata) == metadata_text(c.metadata));
    CHECK(h.file_size() == bytes.size());
}

void check_invalid(const expected_case& c) {
    INFO(c.file << " (expected " << c.error_kind << ")");
    auto bytes = read_file(c.path);
    try {
        parse_file(bytes);
        FAIL("accepted");
    } catch (const error& e) {
        INFO(e.what());
        CHECK(e.kind() == c.error_kind);
        CHECK(std::string(e.what()).size() > 10);
    }
    // The non-throwing overload agrees (when the length prefix is sound).
    if (bytes.size() >= 8) {
        std::uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(bytes[i]);
        if (n <= default_max_header_size && 8 + n <= bytes.size()) {
            status st;
            std::string_view json(reinterpret_cast<const char*>(bytes.data()) + 8, n);
            CHECK_FALSE(parse_header(json, bytes.size(), {}, st));
            CHECK(error_kind(st.code) == c.error_kind);
        }
    }
}

// The same message, but for a JSON error's byte position, which may be later
// (never earlier) when the failing value straddles two pieces.
bool same_error(const std::string& pieced, const std::string& whole) {
    static const std::string lead = "invalid header JSON at byte ";
    if (pieced.rfind(lead, 0) != 0 || whole.rfind(lead, 0) != 0) return pieced == whole;
    std::size_t a = 0, b = 0;
    const auto pa = std::stoull(pieced.substr(lead.size()), &a), pb = std::stoull(whole.substr(lead.size()), &b);
    return pa >= pb && pieced.substr(lead.size() + a) == whole.substr(lead.size() + b);
}

void check_every_file_has_a_line(const std::filesystem::path& dir, const std::vector<expected_case>& cases) {
    std::vector<std::string> listed;
    for (auto& c : cases) listed.push_back(c.file);
    std::sort(listed.begin(), listed.end());
    CHECK(listed == safetensors_files(dir));
}

}  // namespace

// Runs `check` on every case of conformance_dir()/folder after checking the listing.
template <class Check>
void check_folder(const char* folder, std::size_t at_least, bool ok, Check check) {
    auto dir = conformance_dir() / folder;
    auto cases = load_cases(dir);
    REQUIRE(cases.size() >= at_least);
    check_every_file_has_a_line(dir, cases);
    for (auto& c : cases) {
        REQUIRE(c.ok == ok);
        check(c);
    }
}

TEST_CASE("valid conformance files parse to exactly the expected tensors and metadata") {
    check_folder("valid", 60, true, check_valid);
}

TEST_CASE("invalid conformance files fail with the reference's error kind") {
    check_folder("invalid", 80, false, check_invalid);
}

TEST_CASE("every conformance header fed in pieces gets the verdict of the whole") {
    int compared = 0;
    for (const char* folder : {"valid", "invalid"}) {
        for (auto& c : load_cases(conformance_dir() / folder)) {
            auto bytes = read_file(c.path);
            if (bytes.size() < 8) continue;
            std::uint64_t n = 0;
            for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(bytes[i]);
            if (n > default_max_header_size || 8 + n > bytes.size()) continue;  // refused before any byte is fed
            const std::string_view json(reinterpret_cast<const char*>(bytes.data()) + 8, n);
            status st;
            const bool whole = parse_header(json, bytes.size(), {}, st).has_value();
            const std::string whole_message = st.message;
            for (std::size_t piece : {1, 3, 8, 61}) {
                INFO(c.file << " in pieces of " << piece);
                header_parser p(n, bytes.size());
                for (std::size_t at = 0; at < n && p.feed(json.substr(at, piece)); at += piece) {
                }
                status pst;
                auto h = p.finish(pst);
                CHECK(h.has_value() == whole);
                CHECK(same_error(pst.message, whole_message));
                if (h && whole) CHECK(h->tensors.size() == c.tensors.size());
            }
            ++compared;
        }
    }
    CHECK(compared > 100);
}

TEST_CASE("every deviation names an existing quirk case") {
    auto cases = load_cases(conformance_dir() / "valid");
    int found = 0;
    for (auto& c : cases)
        if (find_deviation(c.file)) {
            CHECK(c.quirk);
            ++found;
        }
    CHECK(found == 3);
}

TEST_CASE("serialize_header reproduces the reference writer's bytes") {
    int compared = 0;
    for (auto& c : load_cases(conformance_dir() / "valid")) {
        if (!c.reference_writer || (c.metadata && c.metadata->size() > 1)) continue;
        INFO(c.file);
        auto bytes = read_file(c.path);
        header h = parse_file(bytes);
        std::vector<tensor_entry> entries;
        for (auto& t : h.tensors) entries.push_back({t.name, t.dtype, t.shape, t.begin, t.end});
        std::reverse(entries.begin(), entries.end());  // the order given must not matter
        std::stable_sort(entries.begin(), entries.end(), reference_writer_order);
        std::string json = serialize_header(entries, h.metadata ? &*h.metadata : nullptr);
        CHECK(json.size() % 8 == 0);
        std::byte prefix[8];
        encode_length_prefix(json.size(), prefix);
        std::string expected(reinterpret_cast<const char*>(bytes.data()), h.data_start());
        std::string ours(reinterpret_cast<const char*>(prefix), 8);
        CHECK(ours + json == expected);
        ++compared;
    }
    CHECK(compared >= 30);
}
