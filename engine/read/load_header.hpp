// Reading a safetensors header through a source.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ringsafe/error.hpp"
#include "ringsafe/header.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe::read {

// Parses the header from the source's prefix, then reads the rest of it (when
// 8 + N exceeds the prefix) in pieces of at most header_piece_size, each
// parsed as it arrives, so a huge header is never held whole. Errors are
// parse_length_prefix()/parse_header()'s, with the source's name in front.
header load_header(source& src, const parse_options& opts);

inline constexpr std::size_t header_piece_size = 4u << 20;

// load_header in steps, so that the reads between them may be asynchronous
// (async_open): while more(), read piece() at offset() and call got(); then
// finish(). Errors of every step and of the reads (passed to
// header_read_failed) are named as load_header() names them.
class header_stream {
public:
    header_stream(const source& src, const parse_options& opts);
    bool more() const noexcept { return more_; }
    std::uint64_t offset() const noexcept { return 8 + have_; }
    std::span<std::byte> piece() noexcept { return std::as_writable_bytes(std::span(buf_.data(), len_)); }
    void got();
    header finish();

private:
    void next();
    const source& src_;
    std::optional<header_parser> parser_;
    std::uint64_t n_ = 0;     // header bytes
    std::uint64_t have_ = 0;  // header bytes fed so far
    std::size_t len_ = 0;     // bytes of the next piece
    bool more_ = false;
    std::string buf_;
};

[[noreturn]] void header_read_failed(const source& src, const error& e);

}  // namespace ringsafe::read
