// header lookups (find/at/name index) and tensor_info::elements.
#include <algorithm>
#include <numeric>

#include "ringsafe/header.hpp"

namespace ringsafe {

std::uint64_t tensor_info::elements() const noexcept {
    std::uint64_t n = 1;
    for (std::uint64_t d : shape) n *= d;
    return n;
}

void header::build_name_index() {
    by_name.resize(tensors.size());
    std::iota(by_name.begin(), by_name.end(), std::uint32_t{0});
    auto less = [this](std::uint32_t a, std::uint32_t b) { return tensors[a].name < tensors[b].name; };
    // Real checkpoints list names in sorted runs (the reference writer sorts by
    // dtype, then name), so merging the natural runs beats a full sort; many
    // short runs fall back to std::sort.
    std::vector<std::size_t> runs{0};
    for (std::size_t i = 1; i < by_name.size(); ++i)
        if (less(by_name[i], by_name[i - 1])) runs.push_back(i);
    if (runs.size() > 1 + by_name.size() / 16) {
        std::sort(by_name.begin(), by_name.end(), less);
        return;
    }
    runs.push_back(by_name.size());
    while (runs.size() > 2) {
        std::vector<std::size_t> merged{0};
        for (std::size_t r = 0; r + 1 < runs.size(); r += 2) {
            std::size_t last = std::min(r + 2, runs.size() - 1);
            std::inplace_merge(by_name.begin() + static_cast<std::ptrdiff_t>(runs[r]),
                               by_name.begin() + static_cast<std::ptrdiff_t>(runs[r + 1]),
                               by_name.begin() + static_cast<std::ptrdiff_t>(runs[last]), less);
            merged.push_back(runs[last]);
        }
        runs = std::move(merged);
    }
}

const tensor_info* header::find(std::string_view name) const noexcept {
    if (by_name.size() != tensors.size()) {  // index not built: fall back to a scan
        for (auto& t : tensors)
            if (t.name == name) return &t;
        return nullptr;
    }
    auto it = std::lower_bound(by_name.begin(), by_name.end(), name,
                               [this](std::uint32_t i, std::string_view n) { return tensors[i].name < n; });
    if (it == by_name.end() || tensors[*it].name != name) return nullptr;
    return &tensors[*it];
}

const tensor_info& header::at(std::string_view name) const {
    if (const tensor_info* t = find(name)) return *t;
    raise(errc::TensorNotFound, "tensor '" + std::string(name) + "' not found (the header has " +
                                    std::to_string(tensors.size()) + " tensors)");
}

}  // namespace ringsafe
