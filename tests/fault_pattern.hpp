// The bytes the fault server serves: byte i of every object is fault_byte(i),
// so tests can check what landed without a file.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringsafe::test {

inline std::byte fault_byte(std::uint64_t i) {
    std::uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::byte>((x >> 29) ^ (x >> 47));
}

}  // namespace ringsafe::test
