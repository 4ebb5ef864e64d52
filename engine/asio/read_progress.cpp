#include "asio/read_progress.hpp"

#include <algorithm>

namespace ringsafe::asio::detail {

read_progress::read_progress(const ringsafe::detail::plan_data& plan, std::span<const tensor_info> tensors,
                             read_callbacks cb)
    : plan_(plan), tensors_(tensors), cb_(std::move(cb)) {
    if (!cb_.on_tensor_done) return;
    for (const auto& so : plan_.shards) {
        op_base_.push_back(op_left_.size());
        for (const auto& op : so.ops) op_left_.push_back(op.length);
    }
    for (const auto& t : plan_.targets) target_left_.push_back(t.bytes);
}

void read_progress::start() {
    if (!cb_.on_tensor_done) return;
    for (std::size_t t = 0; t < plan_.targets.size(); ++t)
        if (plan_.targets[t].bytes == 0) cb_.on_tensor_done(t, tensors_[plan_.targets[t].tensor]);
}

void read_progress::landed(std::size_t entry, std::size_t op, std::uint64_t n) {
    if (stopped_ || n == 0) return;
    done_ += n;
    if (cb_.on_progress) cb_.on_progress(done_, plan_.total_bytes);
    if (!cb_.on_tensor_done || entry >= op_base_.size()) return;
    const auto& so = plan_.shards[entry];
    if (op >= so.ops.size()) return;
    std::uint64_t& left = op_left_[op_base_[entry] + op];
    if (left == 0) return;
    left -= std::min(left, n);
    if (left > 0) return;
    for (auto s = so.seg_begin[op]; s < so.seg_begin[op + 1]; ++s) {
        const auto& seg = plan_.segments[s];
        std::uint64_t& tl = target_left_[seg.target];
        if (tl == 0) continue;
        tl -= std::min(tl, seg.bytes);
        if (tl == 0) cb_.on_tensor_done(seg.target, tensors_[plan_.targets[seg.target].tensor]);
    }
}

}  // namespace ringsafe::asio::detail
