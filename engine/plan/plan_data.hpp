// The inside of a read_plan: per-shard read_ops plus the bookkeeping that maps
// each op back to the requests (targets) whose bytes it carries.
#pragma once

#include <cstdint>
#include <vector>

#include "ringsafe/plan.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe::detail {

// One request of the plan: a whole tensor or a box of one.
struct plan_target {
    std::uint32_t tensor = 0;  // index into reader::tensors()
    std::uint64_t bytes = 0;   // bytes the target receives
};

// The part of an op that belongs to one target.
struct op_segment {
    std::uint32_t target = 0;
    std::uint64_t bytes = 0;
    std::uint64_t target_offset = 0;  // where in the target's packed bytes this segment starts
};

// The ops of one shard, sorted by source offset. Op i carries
// segments[seg_begin[i] .. seg_begin[i+1]) of plan_data::segments.
struct shard_ops {
    std::uint32_t shard = 0;
    std::vector<read_op> ops;
    std::vector<std::uint32_t> seg_begin;  // ops.size() + 1 entries
    std::uint64_t bytes = 0;
};

struct plan_data {
    std::uint64_t reader_id = 0;
    std::vector<plan_target> targets;
    std::vector<placement> placements;  // arena plans only
    std::vector<shard_ops> shards;      // only shards with ops
    std::vector<op_segment> segments;
    std::uint64_t total_bytes = 0;
    std::size_t op_count = 0;
};

}  // namespace ringsafe::detail
