// Little-endian integers in GGUF's bytes (internal to engine/format/gguf).
#pragma once

#include <cstdint>
#include <string>

namespace ringsafe::format::gguf {

// The `size`-byte (at most 8) little-endian unsigned integer at `p`.
inline std::uint64_t load_le(const char* p, unsigned size) noexcept {
    std::uint64_t v = 0;
    for (unsigned i = size; i-- > 0;) v = (v << 8) | static_cast<unsigned char>(p[i]);
    return v;
}

// Appends `v` as `size` little-endian bytes.
inline void append_le(std::string& out, std::uint64_t v, unsigned size) {
    for (unsigned i = 0; i < size; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

}  // namespace ringsafe::format::gguf
