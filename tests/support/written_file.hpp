// Test-side view of a file the writer produced: whole file in memory, header
// validated by the format core's parser, tensor bytes looked up by name.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "ringsafe/header.hpp"
#include "test_support.hpp"

namespace ringsafe::test {

struct written_file {
    std::vector<std::byte> bytes;
    header hdr;

    explicit written_file(const std::filesystem::path& p) : bytes(read_file(p)), hdr(parse_file(bytes)) {}

    // The bytes of tensor `name` (throws TensorNotFound).
    std::vector<std::byte> tensor(std::string_view name) const {
        const auto& t = hdr.at(name);
        auto* b = bytes.data() + hdr.data_start() + t.begin;
        return {b, b + t.size()};
    }
};

// `n` deterministic bytes of stream `seed`.
inline std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
    std::vector<std::byte> v(n);
    fill_pattern(v, seed);
    return v;
}

// Files in `dir` (to check that no temporary was left behind).
inline std::vector<std::string> dir_entries(const std::filesystem::path& dir) {
    std::vector<std::string> out;
    for (auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
    return out;
}

}  // namespace ringsafe::test
