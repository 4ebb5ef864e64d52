// parse_header / parse_file: the whole header through header_parser at once.
#include <algorithm>
#include <new>
#include <string>

#include "format/safetensors/length_prefix.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe {

std::optional<header> parse_header(std::string_view json, std::uint64_t file_size,
                                   const parse_options& opts, status& st) noexcept {
    st.clear();
    if (!format::check_header_size(json.size(), file_size, opts, st)) return std::nullopt;
    try {
        header_parser parser(json.size(), file_size, opts);
        parser.feed(json);
        return parser.finish(st);
    } catch (const std::bad_alloc&) {
        st.code = std::make_error_code(std::errc::not_enough_memory);
        st.message = "out of memory while parsing a " + std::to_string(json.size()) + "-byte header";
    }
    return std::nullopt;
}

header parse_header(std::string_view json, std::uint64_t file_size, const parse_options& opts) {
    header_parser parser(json.size(), file_size, opts);
    parser.feed(json);
    return parser.finish();
}

header parse_file(std::span<const std::byte> file, const parse_options& opts) {
    std::uint64_t n = 0;
    status st;
    if (!format::check_length_prefix(file.first(std::min<std::size_t>(8, file.size())), file.size(), opts, n, st))
        raise(st.code, st.message);
    std::string_view json(reinterpret_cast<const char*>(file.data()) + 8, static_cast<std::size_t>(n));
    return parse_header(json, file.size(), opts);
}

}  // namespace ringsafe
