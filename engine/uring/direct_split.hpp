// The one O_DIRECT split policy: the bytes [pos, end) of a read fall into an
// unaligned head (up to the first block boundary), an aligned middle of whole
// blocks, and a tail shorter than a block. The middle may go straight into
// the caller's buffer (when the buffer is aligned there); head and tail go
// through an aligned bounce buffer. read_worker (blocking reads) and
// event_ring (async reads) both split with it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "format/alignment.hpp"

namespace ringsafe::uring {

struct direct_split {
    std::uint64_t head_end;  // [pos, head_end): the unaligned head (empty when pos is aligned)
    std::uint64_t mid_end;   // [head_end, mid_end): whole blocks; [mid_end, end): the tail
};

constexpr direct_split split_direct(std::uint64_t pos, std::uint64_t end, std::uint64_t align) noexcept {
    const std::uint64_t head_end = pos % align ? std::min(end, format::align_down(pos, align) + align) : pos;
    return {head_end, std::max(head_end, format::align_down(end, align))};
}

}  // namespace ringsafe::uring
