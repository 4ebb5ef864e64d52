// Builds small safetensors files in memory for the reader tests, with a header
// written by hand here (independent of the library's serializer) and tensor
// bytes from test::pattern_byte, so expected bytes can be computed separately.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace ringsafe::test {

struct tensor_spec {
    std::string name;
    std::string dtype;                 // "F32", "U8", "F4", ...
    std::vector<std::uint64_t> shape;
    std::uint64_t bytes = 0;           // data bytes (shape x dtype size, given by the test)
};

// A built file: its bytes and each tensor's data offset (relative to the data section).
struct built_file {
    std::vector<std::byte> bytes;
    std::vector<std::uint64_t> begin;  // per tensor, in spec order
    std::uint64_t data_start = 0;      // 8 + N
};

// The pattern seed used for tensor `name`'s bytes.
inline std::uint64_t seed_of(const std::string& name) {
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    return h;
}

// Expected bytes of tensor `name` (its whole data).
inline std::vector<std::byte> tensor_bytes(const std::string& name, std::uint64_t n) {
    std::vector<std::byte> v(n);
    fill_pattern(v, seed_of(name));
    return v;
}

// Lays tensors out back to back in spec order and returns the 8-byte prefix
// plus the header (bytes), without data; `pad_header_to` pads the JSON with
// spaces (0 = to a multiple of 8). Names must not need JSON escaping.
inline built_file build_header(const std::vector<tensor_spec>& ts, std::uint64_t pad_header_to = 0) {
    built_file f;
    std::string json = "{";
    std::uint64_t off = 0;
    for (std::size_t i = 0; i < ts.size(); ++i) {
        const auto& t = ts[i];
        if (i) json += ',';
        json.append("\"").append(t.name).append("\":{\"dtype\":\"").append(t.dtype);
        json.append("\",\"shape\":[");
        for (std::size_t d = 0; d < t.shape.size(); ++d) {
            if (d) json += ',';
            json.append(std::to_string(t.shape[d]));
        }
        json.append("],\"data_offsets\":[").append(std::to_string(off)).append(",");
        json.append(std::to_string(off + t.bytes)).append("]}");
        f.begin.push_back(off);
        off += t.bytes;
    }
    json += "}";
    std::uint64_t n = pad_header_to ? pad_header_to : (json.size() + 7) / 8 * 8;
    json.resize(n, ' ');
    f.data_start = 8 + n;
    f.bytes.resize(8 + n);
    for (int b = 0; b < 8; ++b) f.bytes[b] = static_cast<std::byte>(n >> (8 * b));
    std::memcpy(f.bytes.data() + 8, json.data(), n);
    return f;
}

// build_header() followed by every tensor's pattern bytes.
inline built_file build_file(const std::vector<tensor_spec>& ts, std::uint64_t pad_header_to = 0) {
    built_file f = build_header(ts, pad_header_to);
    std::uint64_t total = 0;
    for (auto& t : ts) total += t.bytes;
    f.bytes.resize(f.data_start + total);
    for (std::size_t i = 0; i < ts.size(); ++i) {
        auto v = tensor_bytes(ts[i].name, ts[i].bytes);
        if (!v.empty()) std::memcpy(f.bytes.data() + f.data_start + f.begin[i], v.data(), v.size());
    }
    return f;
}

// Five tensors of mixed dtypes and sizes whose offsets are not multiples of 4096.
inline const std::vector<tensor_spec> mixed = {
    {"a", "U8", {4099}, 4099},
    {"b", "F32", {1000, 300}, 1'200'000},
    {"c", "F16", {3, 5}, 30},
    {"d", "I64", {70000}, 560'000},
    {"e", "BF16", {2, 4096}, 16384},
};

}  // namespace ringsafe::test
