// Strict UTF-8 validation of a header's bytes (internal to the format component).
#pragma once

#include <cstddef>
#include <string_view>

namespace ringsafe::format {

// Returns the index of the first byte that does not start or continue a valid
// UTF-8 sequence, or std::string_view::npos when all of `bytes` is valid.
// Strict: overlong forms, surrogates (U+D800..U+DFFF) and code points above
// U+10FFFF are invalid, as in Rust's std::str::from_utf8.
std::size_t utf8_invalid_at(std::string_view bytes) noexcept;

}  // namespace ringsafe::format
