// N-d boxes of a tensor -> the fewest contiguous byte runs.
#include "plan/box.hpp"

#include <string>

#include "ringsafe/error.hpp"

namespace ringsafe::plan {
namespace {

[[noreturn]] void bad_box(const tensor_info& t, const std::string& why) {
    raise(errc::InvalidArgument, "tensor '" + t.name + "': " + why);
}

}  // namespace

std::vector<box_run> box_runs(const tensor_info& t, std::span<const dim_range> box) {
    const std::size_t rank = t.shape.size();
    if (box.size() > rank)
        bad_box(t, "slice has " + std::to_string(box.size()) + " ranges but the tensor has " +
                       std::to_string(rank) + " dimensions");
    std::vector<dim_range> full(rank);
    for (std::size_t d = 0; d < rank; ++d) {
        full[d] = d < box.size() ? box[d] : dim_range{0, t.shape[d]};
        if (full[d].start > full[d].stop || full[d].stop > t.shape[d])
            bad_box(t, "range [" + std::to_string(full[d].start) + ", " +
                           std::to_string(full[d].stop) + ") of dimension " + std::to_string(d) +
                           " is not within [0, " + std::to_string(t.shape[d]) + ")");
    }
    std::vector<box_run> runs;
    for (auto& r : full)
        if (r.start == r.stop) return runs;
    // k: the last dimension not covered whole; dims after it merge into each run.
    std::size_t k = rank;
    for (std::size_t d = rank; d-- > 0;)
        if (full[d].start != 0 || full[d].stop != t.shape[d]) {
            k = d;
            break;
        }
    if (k == rank) {
        runs.push_back({0, t.size()});
        return runs;
    }
    std::vector<std::uint64_t> stride(rank, 1);  // in elements
    for (std::size_t d = rank - 1; d-- > 0;) stride[d] = stride[d + 1] * t.shape[d + 1];
    const std::uint64_t bits = dtype_bits(t.dtype);
    const std::uint64_t run_bits = (full[k].stop - full[k].start) * stride[k] * bits;
    std::vector<std::uint64_t> idx(k);
    for (std::size_t d = 0; d < k; ++d) idx[d] = full[d].start;
    for (;;) {
        std::uint64_t elem = full[k].start * stride[k];
        for (std::size_t d = 0; d < k; ++d) elem += idx[d] * stride[d];
        const std::uint64_t start_bits = elem * bits;
        if (start_bits % 8 || run_bits % 8)
            bad_box(t, "a run of the slice starts or ends inside a byte (dtype " +
                           std::string(dtype_name(t.dtype)) + ", element " + std::to_string(elem) +
                           "); sub-byte dtypes can only be sliced on byte boundaries");
        runs.push_back({start_bits / 8, run_bits / 8});
        // Odometer over dimensions 0..k-1, innermost fastest.
        std::size_t d = k;
        while (d > 0) {
            --d;
            if (++idx[d] < full[d].stop) break;
            idx[d] = full[d].start;
            if (d == 0) return runs;
        }
        if (k == 0) return runs;
    }
}

}  // namespace ringsafe::plan
