// Reads the GGUF conformance expectations with Boost.JSON's DOM.
#include "gguf_cases.hpp"

#include <boost/json.hpp>

#include <fstream>
#include <stdexcept>

#include "test_support.hpp"

namespace ringsafe::test {
namespace {

namespace json = boost::json;

std::uint64_t to_u64(const json::value& v) {
    if (v.is_uint64()) return v.get_uint64();
    if (v.is_int64() && v.get_int64() >= 0) return static_cast<std::uint64_t>(v.get_int64());
    throw std::runtime_error("expected.jsonl: not an unsigned integer: " + json::serialize(v));
}

std::vector<std::uint64_t> to_dims(const json::value& v) {
    std::vector<std::uint64_t> out;
    for (auto& d : v.as_array()) out.push_back(to_u64(d));
    return out;
}

std::string str(const json::value& v) { return std::string(v.as_string()); }

gguf_case to_case(const std::filesystem::path& dir, const json::object& o) {
    gguf_case c;
    c.file = str(o.at("file"));
    c.path = dir / c.file;
    c.ok = o.at("ok").as_bool();
    if (auto* q = o.if_contains("quirk")) c.quirk = q->as_bool();
    if (!c.ok) {
        c.error_kind = str(o.at("error_kind"));
        c.header_ok = o.at("header_ok").as_bool();
        return c;
    }
    c.version = static_cast<std::uint32_t>(to_u64(o.at("version")));
    c.alignment = static_cast<std::uint32_t>(to_u64(o.at("alignment")));
    c.data_offset = to_u64(o.at("data_offset"));
    for (auto& mv : o.at("metadata").as_array()) {
        auto& m = mv.as_object();
        gguf_expected_entry e;
        e.key = str(m.at("key"));
        e.type = str(m.at("type"));
        if (auto* et = m.if_contains("element_type")) e.element_type = str(*et);
        e.value = m.at("value");
        c.metadata.push_back(std::move(e));
    }
    for (auto& tv : o.at("tensors").as_array()) {
        auto& t = tv.as_object();
        gguf_expected_tensor e;
        e.name = str(t.at("name"));
        e.type = str(t.at("type"));
        e.type_id = static_cast<std::uint32_t>(to_u64(t.at("type_id")));
        e.shape = to_dims(t.at("shape"));
        e.ne = to_dims(t.at("ne"));
        e.offset = to_u64(t.at("offset"));
        e.nbytes = to_u64(t.at("nbytes"));
        e.sha256 = str(t.at("sha256"));
        if (auto& d = t.at("dequant_f32_sha256"); !d.is_null()) e.dequant_f32_sha256 = str(d);
        c.tensors.push_back(std::move(e));
    }
    if (auto& s = o.at("split"); !s.is_null()) {
        auto& so = s.as_object();
        c.split = gguf_expected_split{to_u64(so.at("no")), to_u64(so.at("count")), to_u64(so.at("tensors_count"))};
    }
    return c;
}

double as_number(const json::value& v) {
    if (v.is_double()) return v.get_double();
    if (v.is_int64()) return static_cast<double>(v.get_int64());
    if (v.is_uint64()) return static_cast<double>(v.get_uint64());
    throw std::runtime_error("not a number: " + json::serialize(v));
}

}  // namespace

std::filesystem::path gguf_conformance_dir() { return shared_dir() / "conformance-gguf"; }

std::vector<gguf_case> load_gguf_cases(const std::filesystem::path& dir) {
    std::ifstream in(dir / "expected.jsonl");
    if (!in) throw std::runtime_error("cannot read " + (dir / "expected.jsonl").string());
    std::vector<gguf_case> out;
    for (std::string line; std::getline(in, line);)
        if (!line.empty()) out.push_back(to_case(dir, json::parse(line).as_object()));
    return out;
}

std::vector<gguf_case> all_gguf_cases() {
    auto out = load_gguf_cases(gguf_conformance_dir() / "valid");
    auto bad = load_gguf_cases(gguf_conformance_dir() / "invalid");
    out.insert(out.end(), bad.begin(), bad.end());
    return out;
}

bool gguf_value_matches(const json::value& actual, const json::value& expected) {
    if (expected.is_array()) {
        if (!actual.is_array() || actual.as_array().size() != expected.as_array().size()) return false;
        for (std::size_t i = 0; i < expected.as_array().size(); ++i)
            if (!gguf_value_matches(actual.as_array()[i], expected.as_array()[i])) return false;
        return true;
    }
    if (expected.is_string()) {
        if (!actual.is_string()) return false;
        const std::string a(actual.as_string());
        return std::string(a.c_str()) == std::string(expected.as_string());
    }
    if (expected.is_bool()) return actual.is_bool() && actual.get_bool() == expected.get_bool();
    if (actual.is_double() || expected.is_double()) {
        if (!actual.is_number()) return false;
        return as_number(actual) == as_number(expected);
    }
    if (expected.is_uint64() || expected.is_int64()) {
        if (actual.is_uint64() && expected.is_uint64()) return actual.get_uint64() == expected.get_uint64();
        if (actual.is_int64() && expected.is_int64()) return actual.get_int64() == expected.get_int64();
        // 0 <= v <= INT64_MAX may be either kind.
        if (actual.is_uint64() && expected.is_int64())
            return expected.get_int64() >= 0 && actual.get_uint64() == static_cast<std::uint64_t>(expected.get_int64());
        if (actual.is_int64() && expected.is_uint64())
            return actual.get_int64() >= 0 && static_cast<std::uint64_t>(actual.get_int64()) == expected.get_uint64();
        return false;
    }
    return actual == expected;
}

}  // namespace ringsafe::test
