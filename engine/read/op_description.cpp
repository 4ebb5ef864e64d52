// Naming what one planned I/O op reads, for error messages.
#include "read/op_description.hpp"

namespace ringsafe::read {

std::string describe_op(const detail::plan_data& plan, std::span<const tensor_info> tensors,
                        std::size_t shard_entry, std::uint32_t op) {
    const auto& so = plan.shards[shard_entry];
    if (op >= so.ops.size()) return {};
    std::string out;
    const auto b = so.seg_begin[op], e = so.seg_begin[op + 1];
    for (auto s = b; s < e && s < b + 3; ++s) {
        const auto& seg = plan.segments[s];
        if (!out.empty()) out += ", ";
        out += "tensor '" + tensors[plan.targets[seg.target].tensor].name + "' (bytes " +
               std::to_string(seg.target_offset) + ".." +
               std::to_string(seg.target_offset + seg.bytes) + " of its read)";
    }
    if (e - b > 3) out += " and " + std::to_string(e - b - 3) + " more";
    return out;
}

}  // namespace ringsafe::read
