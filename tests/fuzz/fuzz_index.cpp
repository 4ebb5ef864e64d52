// libFuzzer target: the sharded-checkpoint index parser
// (model.safetensors.index.json) and shard path resolution on arbitrary text.
// Every accepted index must satisfy what parse_index() promises: shard names
// relative, without `..` or backslashes, sorted and distinct; every weight_map
// entry pointing at a shard; tensor names sorted and distinct.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "ringsafe/index.hpp"
#include "ringsafe/reader.hpp"

namespace {

bool has_dotdot_component(std::string_view s) {
    std::size_t pos = 0;
    while (pos <= s.size()) {
        auto slash = s.find('/', pos);
        auto part = s.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos);
        if (part == "..") return true;
        if (slash == std::string_view::npos) break;
        pos = slash + 1;
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    (void)ringsafe::looks_like_index("model.safetensors", std::as_bytes(std::span(data, size)), size / 2);
    ringsafe::shard_index idx;
    try {
        idx = ringsafe::parse_index(text, "fuzz.index.json");
    } catch (const ringsafe::error& e) {
        FUZZ_CHECK(e.code() == ringsafe::errc::InvalidIndex);
        return 0;
    }
    for (std::size_t i = 0; i < idx.shards.size(); ++i) {
        const auto& s = idx.shards[i];
        FUZZ_CHECK(!s.empty() && s.front() != '/' && s.find('\\') == std::string::npos && !has_dotdot_component(s));
        if (i) FUZZ_CHECK(idx.shards[i - 1] < s);
        auto path = ringsafe::resolve_shard("/models/m/model.safetensors.index.json", s);
        FUZZ_CHECK(path.starts_with("/models/m/"));
        auto url = ringsafe::resolve_shard("https://h.example/m/model.safetensors.index.json?x=1", s);
        FUZZ_CHECK(url.starts_with("https://h.example/m/"));
    }
    for (std::size_t i = 0; i < idx.weight_map.size(); ++i) {
        const auto& [name, shard] = idx.weight_map[i];
        FUZZ_CHECK(shard < idx.shards.size());
        if (i) FUZZ_CHECK(idx.weight_map[i - 1].first < name);
        FUZZ_CHECK(idx.shard_of(name) == static_cast<std::int64_t>(shard));
    }
    return 0;
}
