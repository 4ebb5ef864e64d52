// How much of a planned read is already in the page cache (engine-internal).
#pragma once

#include <span>

#include "ringsafe/source.hpp"

namespace ringsafe::file {

// Fraction (0..1) of the bytes of `ops` that the page cache of the file open
// at `fd` holds, judged from at most 32 evenly spaced ops: cachestat(2) where
// the kernel has it and allows it for this file, else a one-byte
// preadv2(RWF_NOWAIT) at the start and the middle of each sampled op (which
// fails with EAGAIN when that page is not cached). 1 for an empty plan.
double cached_fraction(int fd, std::span<const read_op> ops) noexcept;

}  // namespace ringsafe::file
