// The bytes the fault server serves: byte i of every object is fault_byte(i),
// so tests can check what landed without a file. A 64 KiB table xor'd with the
// block number: no shift of a range reads the same, and the server fills its
// buffers with a vectorizable loop.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace ringsafe::test {

inline const std::array<std::uint8_t, 65536>& fault_table() {
    static const auto table = [] {
        std::array<std::uint8_t, 65536> t{};
        for (std::uint64_t j = 0; j < t.size(); ++j) {
            std::uint64_t x = (j + 1) * 0x9E3779B97F4A7C15ull;
            t[j] = static_cast<std::uint8_t>((x >> 29) ^ (x >> 47));
        }
        return t;
    }();
    return table;
}

inline std::uint8_t fault_block_key(std::uint64_t i) { return static_cast<std::uint8_t>((i >> 16) * 167 + (i >> 24)); }

inline std::byte fault_byte(std::uint64_t i) { return static_cast<std::byte>(fault_table()[i & 0xFFFF] ^ fault_block_key(i)); }

}  // namespace ringsafe::test
