// Reading `.npy` files (format versions 1.0, 2.0, 3.0) as tensor inputs for
// `ringsafe pack`: the header dict is parsed, numpy's descr mapped to a dtype.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ringsafe/dtype.hpp"

namespace ringsafe::cli {

struct npy_layout {
    ringsafe::dtype dtype{};
    std::vector<std::uint64_t> shape;
    std::uint64_t data_offset = 0;  // first byte of the array data in the file
};

// Parses the first bytes of a .npy file (`head` must hold the whole header;
// 64 KiB + 12 bytes is always enough for v1, and the caller rereads for a
// larger v2/v3 header: see npy_header_size). Throws ringsafe::error
// (InvalidArgument) naming `path`: bad magic, unknown version, Fortran order,
// big-endian multi-byte data, or a descr with no safetensors dtype.
npy_layout parse_npy(std::string_view head, const std::string& path);

// Total bytes of magic + header given at least the first 12 bytes; 0 when too short.
std::uint64_t npy_header_size(std::string_view head);

// The safetensors dtype for a numpy descr such as "<f4", "|u1", "<c8"; throws naming `path`.
ringsafe::dtype dtype_from_descr(std::string_view descr, const std::string& path);

}  // namespace ringsafe::cli
