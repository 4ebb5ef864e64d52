// Reading a safetensors header through a source: the prefix, then the rest.
#include "read/load_header.hpp"

#include <cstring>
#include <string>

#include "format/error_context.hpp"

namespace ringsafe::detail {

header_start begin_header(const source& src, const parse_options& opts) {
    header_start s;
    try {
        std::span<const std::byte> prefix = src.prefix();
        const std::uint64_t n = parse_length_prefix(prefix, src.size(), opts);
        if (8 + n <= prefix.size()) {
            std::string_view json(reinterpret_cast<const char*>(prefix.data()) + 8, n);
            s.parsed = parse_header(json, src.size(), opts);
            return s;
        }
        s.json.assign(n, '\0');
        s.have = prefix.size() > 8 ? prefix.size() - 8 : 0;
        if (s.have) std::memcpy(s.json.data(), prefix.data() + 8, s.have);
        return s;
    } catch (const error& e) {
        header_read_failed(src, e);
    }
}

header end_header(const source& src, header_start&& s, const parse_options& opts) {
    try {
        return parse_header(s.json, src.size(), opts);
    } catch (const error& e) {
        header_read_failed(src, e);
    }
}

void header_read_failed(const source& src, const error& e) { rethrow_with(e, src.name(), src.name() + ": "); }

header load_header(source& src, const parse_options& opts) {
    header_start s = begin_header(src, opts);
    if (s.parsed) return std::move(*s.parsed);
    try {
        src.read_exact(s.rest_offset(), s.rest());
    } catch (const error& e) {
        header_read_failed(src, e);
    }
    return end_header(src, std::move(s), opts);
}

}  // namespace ringsafe::detail
