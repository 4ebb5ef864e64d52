// parse_header / parse_file: length checks, UTF-8, JSON, then layout validation.
#include <algorithm>
#include <new>
#include <string>

#include "format/header_json.hpp"
#include "format/length_prefix.hpp"
#include "format/utf8.hpp"
#include "format/validate.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe {
namespace {

bool parse_into(header& h, std::string_view json, std::uint64_t file_size, const parse_options& opts,
                status& st) {
    if (!format::check_header_size(json.size(), file_size, opts, st)) return false;
    if (std::size_t bad = format::utf8_invalid_at(json); bad != std::string_view::npos) {
        st.code = errc::InvalidHeader;
        st.message = "the header is not valid UTF-8 at byte " + std::to_string(bad) + " of " +
                     std::to_string(json.size());
        return false;
    }
    h.header_size = json.size();
    return format::parse_header_json(json, h, st) && format::validate_layout(h, file_size, st);
}

}  // namespace

std::optional<header> parse_header(std::string_view json, std::uint64_t file_size,
                                   const parse_options& opts, status& st) noexcept {
    st.clear();
    try {
        header h;
        if (parse_into(h, json, file_size, opts, st)) return h;
    } catch (const std::bad_alloc&) {
        st.code = std::make_error_code(std::errc::not_enough_memory);
        st.message = "out of memory while parsing a " + std::to_string(json.size()) + "-byte header";
    }
    return std::nullopt;
}

header parse_header(std::string_view json, std::uint64_t file_size, const parse_options& opts) {
    header h;
    status st;
    if (!parse_into(h, json, file_size, opts, st)) raise(st.code, st.message);
    return h;
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
