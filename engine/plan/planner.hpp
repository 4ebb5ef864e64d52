// The planner: byte ranges ("pieces", each bound for caller memory) -> per-shard
// read_ops, coalesced where both source and destination are contiguous and
// split into chunks so that many are in flight. Knows nothing of files or sockets.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "plan/plan_data.hpp"

namespace ringsafe::plan {

// One contiguous source range bound for one contiguous piece of caller memory.
// (40 bytes: a plan of millions of tensors holds one per tensor while it is built.)
struct piece {
    std::uint32_t shard = 0;
    std::uint32_t target = 0;
    std::uint64_t offset = 0;  // absolute offset in the shard's source
    std::uint64_t length = 0;
    std::byte* dst = nullptr;
    std::uint64_t target_offset = 0;  // offset of this piece within the target's packed bytes
};

// Per-shard chunking preferences (index = shard).
struct shard_chunking {
    std::uint64_t chunk = 4u << 20;  // max op length (> 0)
    std::uint64_t alignment = 1;     // cut points land on multiples of this when possible
};

// Fills data.shards, data.segments, data.op_count and data.total_bytes from
// `pieces` (reordered in place). Zero-length pieces produce no ops.
void build_ops(std::vector<piece>& pieces, std::span<const shard_chunking> chunking,
               bool coalesce, detail::plan_data& data);

// The targets of two pieces whose destinations overlap, if any.
std::optional<std::pair<std::uint32_t, std::uint32_t>> find_overlap(std::span<const piece> pieces);

}  // namespace ringsafe::plan
