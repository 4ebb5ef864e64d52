// The 8-byte little-endian length prefix: decoding with the reference's checks, encoding.
#include "format/safetensors/length_prefix.hpp"

#include <string>

namespace ringsafe::format {

bool check_header_size(std::uint64_t n, std::uint64_t file_size, const parse_options& opts, status& st) {
    if (n > opts.max_header_size) {
        st.code = errc::HeaderTooLarge;
        st.message = "header length " + std::to_string(n) + " is above the limit of " +
                     std::to_string(opts.max_header_size) + " bytes";
        return false;
    }
    std::uint64_t stop = 0;
    if (__builtin_add_overflow(n, std::uint64_t{8}, &stop) || stop > file_size) {
        st.code = errc::InvalidHeaderLength;
        st.message = "header length " + std::to_string(n) + " goes past the end of the file (8 + " +
                     std::to_string(n) + " > " + std::to_string(file_size) + " bytes)";
        return false;
    }
    return true;
}

bool check_length_prefix(std::span<const std::byte> prefix, std::uint64_t file_size,
                         const parse_options& opts, std::uint64_t& n, status& st) {
    if (file_size < 8) {
        st.code = errc::HeaderTooSmall;
        st.message = "the file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte length prefix";
        return false;
    }
    if (prefix.size() < 8) {
        st.code = errc::InvalidArgument;
        st.message = "parse_length_prefix needs 8 bytes, got " + std::to_string(prefix.size());
        return false;
    }
    n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(prefix[static_cast<std::size_t>(i)]);
    return check_header_size(n, file_size, opts, st);
}

}  // namespace ringsafe::format

namespace ringsafe {

std::uint64_t parse_length_prefix(std::span<const std::byte> prefix, std::uint64_t file_size,
                                  const parse_options& opts) {
    std::uint64_t n = 0;
    status st;
    if (!format::check_length_prefix(prefix, file_size, opts, n, st)) raise(st.code, st.message);
    return n;
}

void encode_length_prefix(std::uint64_t n, std::byte out[8]) noexcept {
    for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(n >> (8 * i));
}

}  // namespace ringsafe
