// The pipeline's units of work: the selection cut, in output order, into
// batches of at most one buffer each (engine-internal: convert_file's stage).
#pragma once

#include <cstdint>
#include <vector>

#include "ringsafe/reader.hpp"

namespace ringsafe::convert {

// Output byte offsets that batches keep in their buffers (the data section of
// a target starts 4096-aligned, so O_DIRECT writes go straight from a buffer).
inline constexpr std::uint64_t page = 4096;

struct piece {
    std::uint32_t tensor;  // index in reader::tensors()
    std::uint64_t offset;  // within the tensor
    std::uint64_t length;
};

// Consecutive output bytes of one shard that fit one buffer.
struct batch {
    std::vector<piece> pieces;
    std::uint32_t shard = 0;
    std::uint64_t out_offset = 0;  // data-section offset of its first byte in the target
    std::uint64_t bytes = 0;
};

// Cuts the selection, in order, into batches. A batch lies in its buffer at
// (out_offset mod 4096), congruent with its file offset in the target, so it
// holds at most buf_size - that.
std::vector<batch> cut_batches(const reader& r, const selection& sel, std::uint64_t buf_size);

}  // namespace ringsafe::convert
