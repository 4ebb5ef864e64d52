// Reads the conformance expectations with Boost.JSON's DOM.
#include "conformance_cases.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <fstream>
#include <stdexcept>

namespace ringsafe::test {
namespace {

namespace json = boost::json;

constexpr deviation all_deviations[] = {
    {"ok_duplicate_tensor_identical.safetensors", "DuplicateTensorName",
     "the format forbids repeated tensor names; the reference silently keeps one entry"},
    {"ok_duplicate_tensor_last_wins.safetensors", "DuplicateTensorName",
     "the format forbids repeated tensor names; the reference silently keeps the last entry"},
    {"ok_duplicate_via_escape.safetensors", "DuplicateTensorName",
     "\"a\" and \"\\u0061\" are the same name after unescaping: a repeated name"},
};

std::uint64_t to_u64(const json::value& v) {
    if (v.is_uint64()) return v.get_uint64();
    if (v.is_int64() && v.get_int64() >= 0) return static_cast<std::uint64_t>(v.get_int64());
    throw std::runtime_error("expected.jsonl: not an unsigned integer: " + json::serialize(v));
}

std::string str(const json::value& v) { return std::string(v.as_string()); }

expected_case to_case(const std::filesystem::path& dir, const json::object& o) {
    expected_case c;
    c.file = str(o.at("file"));
    c.path = dir / c.file;
    c.ok = o.at("ok").as_bool();
    if (auto* q = o.if_contains("quirk")) c.quirk = q->as_bool();
    if (auto* r = o.if_contains("reference_writer")) c.reference_writer = r->as_bool();
    if (!c.ok) {
        c.error_kind = str(o.at("error_kind"));
        return c;
    }
    for (auto& tv : o.at("tensors").as_array()) {
        auto& t = tv.as_object();
        expected_tensor e;
        e.name = str(t.at("name"));
        e.dtype = str(t.at("dtype"));
        for (auto& d : t.at("shape").as_array()) e.shape.push_back(to_u64(d));
        auto& off = t.at("data_offsets").as_array();
        e.begin = to_u64(off.at(0));
        e.end = to_u64(off.at(1));
        e.sha256 = str(t.at("sha256"));
        c.tensors.push_back(std::move(e));
    }
    if (auto& m = o.at("metadata"); !m.is_null()) {
        c.metadata.emplace();
        for (auto& kv : m.as_object()) (*c.metadata)[std::string(kv.key())] = str(kv.value());
    }
    return c;
}

}  // namespace

std::vector<expected_case> load_cases(const std::filesystem::path& dir) {
    std::ifstream in(dir / "expected.jsonl");
    if (!in) throw std::runtime_error("cannot read " + (dir / "expected.jsonl").string());
    std::vector<expected_case> out;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(to_case(dir, json::parse(line).as_object()));
    return out;
}

std::vector<std::string> safetensors_files(const std::filesystem::path& dir) {
    std::vector<std::string> names;
    for (auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".safetensors") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

const deviation* find_deviation(std::string_view file) {
    for (const deviation& d : all_deviations)
        if (d.file == file) return &d;
    return nullptr;
}

}  // namespace ringsafe::test
