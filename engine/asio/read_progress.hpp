// Progress bookkeeping of one async read (engine-internal): bytes per op,
// per target and in all, turned into the caller's read_callbacks. Touched
// only on the engine's strand, so it needs no atomics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "plan/plan_data.hpp"
#include "ringsafe/asio.hpp"

namespace ringsafe::asio::detail {

class read_progress {
public:
    // Does nothing (and allocates nothing) when `cb` has no callback.
    read_progress(const ringsafe::detail::plan_data& plan, std::span<const tensor_info> tensors, read_callbacks cb);

    // Reports the zero-byte targets (before any I/O).
    void start();
    // `n` bytes of op `op` of shard entry `entry` landed.
    void landed(std::size_t entry, std::size_t op, std::uint64_t n);
    // No more callbacks (the read completes, was cancelled or failed).
    void stop() noexcept { stopped_ = true; }

private:
    const ringsafe::detail::plan_data& plan_;
    std::span<const tensor_info> tensors_;
    read_callbacks cb_;
    std::vector<std::uint64_t> op_left_;      // per op of every shard, flattened
    std::vector<std::size_t> op_base_;        // per shard entry: its first index in op_left_
    std::vector<std::uint64_t> target_left_;  // per target
    std::uint64_t done_ = 0;
    bool stopped_ = false;
};

}  // namespace ringsafe::asio::detail
