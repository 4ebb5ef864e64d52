// Strict UTF-8 validation of a header's bytes (internal to the format component).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ringsafe::format {

// Returns the index of the first byte that does not start or continue a valid
// UTF-8 sequence, or std::string_view::npos when all of `bytes` is valid.
// Strict: overlong forms, surrogates (U+D800..U+DFFF) and code points above
// U+10FFFF are invalid, as in Rust's std::str::from_utf8.
std::size_t utf8_invalid_at(std::string_view bytes) noexcept;

// utf8_invalid_at() over bytes that arrive in pieces: a sequence may be split
// between two pieces. Positions count from the first byte fed.
class utf8_stream {
public:
    static constexpr std::uint64_t valid = static_cast<std::uint64_t>(-1);
    // Checks the next piece; returns the position of the first invalid byte
    // seen so far, or `valid`. Once invalid, the answer stays.
    std::uint64_t feed(std::string_view bytes) noexcept;
    // After the last piece: a sequence cut short by the end is invalid at its lead byte.
    std::uint64_t finish() noexcept;

private:
    unsigned char tail_[4] = {};  // the start of a sequence the last piece cut
    std::size_t tail_len_ = 0;
    std::uint64_t tail_at_ = 0;   // position of tail_[0]
    std::uint64_t pos_ = 0;       // bytes fed
    std::uint64_t bad_ = valid;
};

}  // namespace ringsafe::format
