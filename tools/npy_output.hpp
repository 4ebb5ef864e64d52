// Writing tensors as `.npy` (numpy format 1.0, or 2.0 for huge headers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringsafe/dtype.hpp"

namespace ringsafe::cli {

// numpy's descr for a dtype ("<f4", "|u1", "<c8", ...); nullopt when numpy has
// no equivalent (BF16, the F8/F6/F4 kinds): such tensors are written raw.
std::optional<std::string_view> npy_descr(ringsafe::dtype t) noexcept;

// The magic, version, header length and header dict of a C-order array of
// `shape`, padded with spaces and a newline to a multiple of 64 bytes.
std::string npy_header(std::string_view descr, const std::vector<std::uint64_t>& shape);

// A file name for a tensor: bytes other than A-Z a-z 0-9 . _ - become '_',
// a leading '.' gets a '_' in front, an empty name becomes "_".
std::string file_name_for(std::string_view tensor);

}  // namespace ringsafe::cli
