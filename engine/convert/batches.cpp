// The selection cut into batches (batches.hpp).
#include "convert/batches.hpp"

#include <algorithm>

namespace ringsafe::convert {

std::vector<batch> cut_batches(const reader& r, const selection& sel, std::uint64_t buf_size) {
    auto tensors = r.tensors();
    std::vector<batch> out(1);
    std::uint64_t pos = 0;
    for (auto i : sel.indices()) {
        const auto& t = tensors[i];
        const auto shard = r.shard_of(i);
        std::uint64_t off = 0;
        do {
            auto* b = &out.back();
            const std::uint64_t cap = buf_size - b->out_offset % page;
            if ((b->bytes >= cap || b->shard != shard) && !b->pieces.empty()) {
                b = &out.emplace_back();
                b->out_offset = pos;
            }
            b->shard = shard;
            const std::uint64_t n = std::min(t.size() - off, buf_size - b->out_offset % page - b->bytes);
            b->pieces.push_back({i, off, n});
            b->bytes += n;
            off += n;
            pos += n;
        } while (off < t.size());
    }
    return out;
}

}  // namespace ringsafe::convert
