// Whether a shard's header is still the one the reader parsed: its bytes as
// they are now (a mapping made resident over its header, say) parsed again
// and compared record by record. What the Python mmap backend checks before
// it hands out views of a file that may have been rewritten in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ringsafe/reader.hpp"

namespace ringsafe::read {

// Whether `bytes` (at least the shard's first data_start bytes) start with the
// safetensors header `r` parsed for shard `shard`: the same length, every
// tensor's name, dtype, shape and offsets, and the same __metadata__. False for
// bytes too short, a shard index out of range, or bytes that no longer parse.
bool header_matches(const reader& r, std::size_t shard, std::span<const std::byte> bytes);

}  // namespace ringsafe::read
