// read_plan's accessors.
#include "plan/plan_data.hpp"

namespace ringsafe {

std::uint64_t read_plan::total_bytes() const noexcept { return d_ ? d_->total_bytes : 0; }
std::size_t read_plan::op_count() const noexcept { return d_ ? d_->op_count : 0; }
std::size_t read_plan::target_count() const noexcept { return d_ ? d_->targets.size() : 0; }
std::span<const placement> read_plan::placements() const noexcept {
    if (!d_) return {};
    return d_->placements;
}

}  // namespace ringsafe
