// How the reader names the shards of an index (resolve_shard) and tells an
// index from a safetensors file (looks_like_index), for a path or a URL.
#include <cstring>
#include <filesystem>

#include "ringsafe/open_source.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe {

std::string resolve_shard(const std::string& index_spec, const std::string& shard) {
    if (is_url(index_spec)) {
        std::string base = index_spec.substr(0, index_spec.find_first_of("?#"));
        std::size_t scheme_end = base.find("://");
        std::size_t slash = base.rfind('/');
        if (slash == std::string::npos || slash < scheme_end + 3) return base + "/" + shard;
        return base.substr(0, slash + 1) + shard;
    }
    std::filesystem::path dir = std::filesystem::path(index_spec).parent_path();
    return dir.empty() ? shard : (dir / shard).string();
}

bool looks_like_index(std::string_view spec, std::span<const std::byte> prefix,
                      std::uint64_t size) noexcept {
    std::string_view path = spec.substr(0, is_url(spec) ? spec.find_first_of("?#") : spec.npos);
    if (path.ends_with(".json")) return true;
    std::size_t i = 0;
    while (i < prefix.size() && std::strchr(" \t\r\n", static_cast<char>(prefix[i])) &&
           prefix[i] != std::byte{0})
        ++i;
    if (i >= prefix.size() || prefix[i] != std::byte{'{'} || prefix.size() < 8) return false;
    std::uint64_t n = 0;
    for (int b = 7; b >= 0; --b) n = n << 8 | static_cast<std::uint8_t>(prefix[b]);
    return size < 8 || n > size - 8;
}

}  // namespace ringsafe
