// Naming what one planned I/O op reads, for error messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "plan/plan_data.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe::read {

// "tensor 'w' (bytes 0..4096 of its read), ..." for op `op` of shard entry
// `shard_entry` of `plan` (at most three tensors named, then "and N more");
// empty when `op` is out of range. `tensors` is the reader's tensor table.
std::string describe_op(const detail::plan_data& plan, std::span<const tensor_info> tensors,
                        std::size_t shard_entry, std::uint32_t op);

}  // namespace ringsafe::read
