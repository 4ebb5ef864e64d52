// Sharded index files (model.safetensors.index.json): parsing.
#include "ringsafe/index.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <boost/json/basic_parser_impl.hpp>


namespace ringsafe {
namespace {

namespace json = boost::json;

// Boost.JSON's DOM keeps the last of repeated keys silently; this SAX pass
// collects the keys of the top level and of "weight_map" so repeats are caught.
struct key_collector {
    static constexpr std::size_t max_object_size = std::size_t(-1);
    static constexpr std::size_t max_array_size = std::size_t(-1);
    static constexpr std::size_t max_key_size = std::size_t(-1);
    static constexpr std::size_t max_string_size = std::size_t(-1);

    int depth = 0;
    bool in_map = false;  // inside the top-level "weight_map" object
    std::string key;
    std::vector<std::string> top_keys, map_keys;

    using ec_t = json::error_code;
    using sv = json::string_view;
    bool on_document_begin(ec_t&) { return true; }
    bool on_document_end(ec_t&) { return true; }
    bool on_array_begin(ec_t&) { return ++depth, true; }
    bool on_array_end(std::size_t, ec_t&) { return end_container(); }
    bool on_object_begin(ec_t&) {
        ++depth;
        if (depth == 2 && top_keys.size() && top_keys.back() == "weight_map") in_map = true;
        return true;
    }
    bool on_object_end(std::size_t, ec_t&) { return end_container(); }
    bool end_container() {
        if (depth == 2) in_map = false;
        --depth;
        return true;
    }
    bool on_string_part(sv, std::size_t, ec_t&) { return true; }
    bool on_string(sv, std::size_t, ec_t&) { return true; }
    bool on_key_part(sv s, std::size_t, ec_t&) { return key.append(s.data(), s.size()), true; }
    bool on_key(sv s, std::size_t, ec_t&) {
        key.append(s.data(), s.size());
        if (depth == 1) top_keys.push_back(key);
        else if (depth == 2 && in_map) map_keys.push_back(key);
        key.clear();
        return true;
    }
    bool on_number_part(sv, ec_t&) { return true; }
    bool on_int64(std::int64_t, sv, ec_t&) { return true; }
    bool on_uint64(std::uint64_t, sv, ec_t&) { return true; }
    bool on_double(double, sv, ec_t&) { return true; }
    bool on_bool(bool, ec_t&) { return true; }
    bool on_null(ec_t&) { return true; }
    bool on_comment_part(sv, ec_t&) { return true; }
    bool on_comment(sv, ec_t&) { return true; }
};

[[noreturn]] void bad_index(const std::string& name, const std::string& why) {
    raise(errc::InvalidIndex, "index " + name + ": " + why);
}

std::optional<std::string> first_repeat(std::vector<std::string> keys) {
    std::sort(keys.begin(), keys.end());
    auto it = std::adjacent_find(keys.begin(), keys.end());
    if (it == keys.end()) return std::nullopt;
    return *it;
}

bool unsafe_shard_name(std::string_view s) {
    if (s.empty() || s.front() == '/' || s.find('\\') != s.npos || s.find("://") != s.npos ||
        s.find('\0') != s.npos)
        return true;
    std::size_t i = 0;
    while (i <= s.size()) {
        std::size_t j = s.find('/', i);
        if (j == s.npos) j = s.size();
        if (s.substr(i, j - i) == "..") return true;
        i = j + 1;
    }
    return false;
}

}  // namespace

std::int64_t shard_index::shard_of(std::string_view tensor) const noexcept {
    auto it = std::lower_bound(weight_map.begin(), weight_map.end(), tensor,
                               [](const auto& e, std::string_view t) { return e.first < t; });
    if (it == weight_map.end() || it->first != tensor) return -1;
    return it->second;
}

shard_index parse_index(std::string_view text, const std::string& name) {
    key_collector keys;
    {
        json::basic_parser<key_collector> p(json::parse_options{});
        json::error_code ec;
        std::size_t used = p.write_some(false, text.data(), text.size(), ec);
        if (ec) bad_index(name, "not valid JSON (" + ec.message() + ")");
        if (used != text.size()) bad_index(name, "data after the JSON object");
        keys = std::move(p.handler());
    }
    if (auto k = first_repeat(keys.top_keys)) bad_index(name, "key '" + *k + "' appears twice");
    if (auto k = first_repeat(keys.map_keys))
        bad_index(name, "tensor '" + *k + "' appears twice in the weight_map");

    json::value doc = json::parse(json::string_view(text.data(), text.size()));
    const json::object* top = doc.if_object();
    if (!top) bad_index(name, "the top level is not a JSON object");
    shard_index out;
    if (auto* m = top->if_contains("metadata"); m && !m->is_null()) {
        const json::object* mo = m->if_object();
        if (!mo) bad_index(name, "\"metadata\" is not an object");
        out.metadata.emplace();
        for (auto& kv : *mo) {
            std::string key(kv.key());
            if (auto* s = kv.value().if_string()) (*out.metadata)[key] = std::string(*s);
            else (*out.metadata)[key] = json::serialize(kv.value());
        }
    }
    const json::value* wm = top->if_contains("weight_map");
    if (!wm) bad_index(name, "no \"weight_map\"");
    const json::object* wmo = wm->if_object();
    if (!wmo) bad_index(name, "\"weight_map\" is not an object");
    std::vector<std::pair<std::string, std::string>> entries;
    entries.reserve(wmo->size());
    for (auto& kv : *wmo) {
        const json::string* s = kv.value().if_string();
        if (!s) bad_index(name, "weight_map value of tensor '" + std::string(kv.key()) + "' is not a string");
        if (unsafe_shard_name(*s))
            bad_index(name, "tensor '" + std::string(kv.key()) + "' maps to shard '" + std::string(*s) +
                                "', which is not a relative path inside the index's directory");
        entries.emplace_back(std::string(kv.key()), std::string(*s));
        out.shards.emplace_back(*s);
    }
    std::sort(out.shards.begin(), out.shards.end());
    out.shards.erase(std::unique(out.shards.begin(), out.shards.end()), out.shards.end());
    std::sort(entries.begin(), entries.end());
    out.weight_map.reserve(entries.size());
    for (auto& [tensor, shard] : entries) {
        auto it = std::lower_bound(out.shards.begin(), out.shards.end(), shard);
        out.weight_map.emplace_back(std::move(tensor),
                                    static_cast<std::uint32_t>(it - out.shards.begin()));
    }
    return out;
}

}  // namespace ringsafe
