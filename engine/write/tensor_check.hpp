// Validation of what a caller asks the writer to write, before any byte is
// written: names, shapes, byte counts, metadata.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>

#include "ringsafe/dtype.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe::write {

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF).
bool valid_utf8(std::string_view s) noexcept;

// Bytes of a tensor of `shape` and `t`: throws ValidationOverflow when the
// element count or bit size overflows 64 bits (running product, as the
// reference) and MisalignedSlice when the bits are not whole bytes. Names the tensor.
std::uint64_t tensor_bytes(std::string_view name, dtype t, std::span<const std::uint64_t> shape);

// Checks a tensor name: valid UTF-8, not `__metadata__`, not already in
// `seen` (DuplicateTensorName). Throws InvalidArgument / DuplicateTensorName
// naming the tensor; the caller inserts the name once the tensor is accepted.
void check_name(std::string_view name, const std::unordered_set<std::string>& seen);

// Checks that metadata keys and values are valid UTF-8 (InvalidArgument).
void check_metadata(const metadata_map& m);

// "tensor 'name'" with the name shown safely for messages.
std::string describe_tensor(std::string_view name);

}  // namespace ringsafe::write
