// Reading a safetensors header through a source: the prefix, then the rest.
#include "read/load_header.hpp"

#include <cstring>
#include <string>

#include "read/error_context.hpp"

namespace ringsafe::detail {

header load_header(source& src, const parse_options& opts) {
    try {
        std::span<const std::byte> prefix = src.prefix();
        const std::uint64_t n = parse_length_prefix(prefix, src.size(), opts);
        if (8 + n <= prefix.size()) {
            std::string_view json(reinterpret_cast<const char*>(prefix.data()) + 8, n);
            return parse_header(json, src.size(), opts);
        }
        std::string json(n, '\0');
        const std::size_t have = prefix.size() > 8 ? prefix.size() - 8 : 0;
        if (have) std::memcpy(json.data(), prefix.data() + 8, have);
        src.read_exact(8 + have, std::as_writable_bytes(std::span(json.data() + have, n - have)));
        return parse_header(json, src.size(), opts);
    } catch (const error& e) {
        rethrow_with(e, src.name(), src.name() + ": ");
    }
}

}  // namespace ringsafe::detail
