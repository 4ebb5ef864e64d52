// N-d boxes of a tensor -> the fewest contiguous byte runs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ringsafe/header.hpp"
#include "ringsafe/plan.hpp"

namespace ringsafe::plan {

// A contiguous run of a box, in bytes relative to the tensor's first byte.
struct box_run {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
};

// The runs of `box` (see read_request::box) in row-major order, which is the
// order they are packed in the destination. Trailing dimensions covered whole
// are merged into each run, so the count is minimal. Throws InvalidArgument
// naming the tensor when the box has more ranges than dimensions, a range is
// reversed or beyond its dimension, or a run of a sub-byte dtype would not
// start and end on a byte boundary. An empty box range gives no runs.
std::vector<box_run> box_runs(const tensor_info& t, std::span<const dim_range> box);

}  // namespace ringsafe::plan
