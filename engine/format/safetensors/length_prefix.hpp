// The 8-byte length prefix (internal to the format component).
#pragma once

#include <cstdint>
#include <span>

#include "ringsafe/error.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe::format {

// Non-throwing parse_length_prefix(): stores N in `n` or fills `st`.
bool check_length_prefix(std::span<const std::byte> prefix, std::uint64_t file_size,
                         const parse_options& opts, std::uint64_t& n, status& st);

// The checks that depend only on N: HeaderTooLarge, then InvalidHeaderLength.
bool check_header_size(std::uint64_t n, std::uint64_t file_size, const parse_options& opts, status& st);

}  // namespace ringsafe::format
