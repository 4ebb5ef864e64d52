// header_parser: the header's bytes in pieces through the UTF-8, JSON and
// layout stages; parse_header() feeds it all at once.
#include <new>
#include <string>

#include "format/safetensors/header_json.hpp"
#include "format/safetensors/length_prefix.hpp"
#include "format/utf8.hpp"
#include "format/safetensors/validate.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe {

struct header_parser::impl {
    impl(std::uint64_t n, std::uint64_t size) : file_size(size), json(h, n) { h.header_size = n; }

    header h;
    std::uint64_t file_size;
    format::utf8_stream utf8;
    format::header_json json;
    std::uint64_t fed = 0;
    status json_error;  // the first JSON error, reported unless the UTF-8 is invalid too
    status failure;     // an error outside the JSON and UTF-8 stages (out of memory)

    void utf8_failed(std::uint64_t at, status& st) const {
        st.code = errc::InvalidHeader;
        st.message = "the header is not valid UTF-8 at byte " + std::to_string(at) + " of " +
                     std::to_string(h.header_size);
    }
};

header_parser::header_parser(std::uint64_t n, std::uint64_t file_size, const parse_options& opts) {
    status st;
    if (!format::check_header_size(n, file_size, opts, st)) raise(st.code, st.message);
    p_ = std::make_unique<impl>(n, file_size);
}

header_parser::~header_parser() = default;
header_parser::header_parser(header_parser&&) noexcept = default;
header_parser& header_parser::operator=(header_parser&&) noexcept = default;

bool header_parser::feed(std::string_view bytes) {
    impl& p = *p_;
    if (p.failure.code) return false;
    if (bytes.size() > p.h.header_size - p.fed) {
        p.failure.code = errc::InvalidArgument;
        p.failure.message = "header_parser fed " + std::to_string(p.fed + bytes.size()) + " bytes of a " +
                            std::to_string(p.h.header_size) + "-byte header";
        return false;
    }
    p.fed += bytes.size();
    if (p.utf8.feed(bytes) != format::utf8_stream::valid) return false;
    try {
        if (!p.json_error.code) p.json.feed(bytes, p.json_error);
    } catch (const std::bad_alloc&) {
        p.failure.code = std::make_error_code(std::errc::not_enough_memory);
        p.failure.message = "out of memory while parsing a " + std::to_string(p.h.header_size) + "-byte header";
        return false;
    }
    return true;
}

std::optional<header> header_parser::finish(status& st) noexcept {
    st.clear();
    impl& p = *p_;
    try {
        if (p.failure.code) {
            st = p.failure;
        } else if (std::uint64_t bad = p.utf8.finish(); bad != format::utf8_stream::valid) {
            p.utf8_failed(bad, st);
        } else if (p.fed != p.h.header_size) {
            st.code = errc::InvalidArgument;
            st.message = "header_parser finished after " + std::to_string(p.fed) + " of " +
                         std::to_string(p.h.header_size) + " header bytes";
        } else if (p.json_error.code) {
            st = p.json_error;
        } else if (p.json.finish(st) && format::validate_layout(p.h, p.file_size, st)) {
            return std::move(p.h);
        }
    } catch (const std::bad_alloc&) {
        st.code = std::make_error_code(std::errc::not_enough_memory);
        st.message = "out of memory while parsing a " + std::to_string(p.h.header_size) + "-byte header";
    }
    return std::nullopt;
}

header header_parser::finish() {
    status st;
    if (auto h = finish(st)) return std::move(*h);
    raise(st.code, st.message);
}

}  // namespace ringsafe
