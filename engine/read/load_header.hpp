// Reading a safetensors header through a source.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ringsafe/error.hpp"
#include "ringsafe/header.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe::detail {

// Parses the header from the source's prefix; issues one read_exact for the
// part of the header beyond the prefix, only when 8 + N exceeds it. Errors are
// parse_length_prefix()/parse_header()'s, with the source's name in front.
header load_header(source& src, const parse_options& opts);

// load_header in two steps, so that the read between them may be
// asynchronous (async_open). begin_header() parses the header when the
// prefix holds it; otherwise it returns the JSON text so far and which bytes
// to read into rest(). Errors of either step and of the read (passed to
// header_read_failed) are named as load_header() names them.
struct header_start {
    std::optional<header> parsed;  // set when the prefix held the whole header
    std::string json;              // N bytes: those of the prefix, then the rest
    std::size_t have = 0;          // bytes of json taken from the prefix
    std::uint64_t rest_offset() const noexcept { return 8 + have; }
    std::span<std::byte> rest() noexcept {
        return std::as_writable_bytes(std::span(json.data() + have, json.size() - have));
    }
};
header_start begin_header(const source& src, const parse_options& opts);
header end_header(const source& src, header_start&& s, const parse_options& opts);
[[noreturn]] void header_read_failed(const source& src, const error& e);

}  // namespace ringsafe::detail
