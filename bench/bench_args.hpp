// Command-line values shared by the benchmarks.
#pragma once

#include <cctype>
#include <cstdint>
#include <string>

namespace ringsafe::bench {

// "512M", "1.5G", "64K", "4096": bytes (K/M/G are powers of 1024, either case).
// Throws std::invalid_argument when `s` does not start with a number.
inline std::uint64_t parse_size(const std::string& s) {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    const char u = used < s.size() ? static_cast<char>(std::toupper(static_cast<unsigned char>(s[used]))) : 0;
    return static_cast<std::uint64_t>(v * (u == 'G' ? 1ull << 30 : u == 'M' ? 1ull << 20 : u == 'K' ? 1ull << 10 : 1));
}

}  // namespace ringsafe::bench
