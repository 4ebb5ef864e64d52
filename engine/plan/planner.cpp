// The planner: coalesce contiguous ranges, split long ones into chunks.
#include "plan/planner.hpp"

#include <algorithm>
#include <cstdint>

namespace ringsafe::plan {
namespace {

// End of the op that starts at `pos` in a run ending at `end`: at most `chunk`
// bytes, cut on a multiple of `align` when that still makes progress.
std::uint64_t next_cut(std::uint64_t pos, std::uint64_t end, std::uint64_t chunk,
                       std::uint64_t align) {
    if (end - pos <= chunk) return end;
    std::uint64_t cut = pos + chunk;
    if (align > 1) {
        std::uint64_t aligned = cut / align * align;
        if (aligned > pos) cut = aligned;
    }
    return cut;
}

}  // namespace

void build_ops(std::vector<piece>& pieces, std::span<const shard_chunking> chunking,
               bool coalesce, detail::plan_data& d) {
    std::erase_if(pieces, [](const piece& p) { return p.length == 0; });
    auto source_order = [](const piece& a, const piece& b) {
        if (a.shard != b.shard) return a.shard < b.shard;
        return a.offset < b.offset;
    };
    // Pieces usually come in source order already; stable_sort would still
    // allocate a buffer as large as them.
    if (!std::is_sorted(pieces.begin(), pieces.end(), source_order))
        std::stable_sort(pieces.begin(), pieces.end(), source_order);
    d.shards.clear();
    d.segments.clear();
    // One segment per piece, plus one per extra chunk a piece is cut into.
    std::uint64_t cuts = 0;
    for (const piece& p : pieces) {
        const shard_chunking& ch = chunking[p.shard];
        cuts += p.length / (ch.chunk ? ch.chunk : (4u << 20));
    }
    d.segments.reserve(pieces.size() + cuts);
    d.total_bytes = 0;
    d.op_count = 0;
    const std::size_t n = pieces.size();
    for (std::size_t i = 0; i < n;) {
        const piece& first = pieces[i];
        if (d.shards.empty() || d.shards.back().shard != first.shard) {
            if (!d.shards.empty())
                d.shards.back().seg_begin.push_back(static_cast<std::uint32_t>(d.segments.size()));
            d.shards.emplace_back();
            d.shards.back().shard = first.shard;
        }
        detail::shard_ops& so = d.shards.back();
        // The run [i, j): pieces contiguous in the source and in memory.
        std::size_t j = i + 1;
        std::uint64_t run_end = first.offset + first.length;
        std::byte* dst_end = first.dst + first.length;
        while (coalesce && j < n && pieces[j].shard == first.shard && pieces[j].offset == run_end &&
               pieces[j].dst == dst_end) {
            run_end += pieces[j].length;
            dst_end += pieces[j].length;
            ++j;
        }
        const shard_chunking& ch = chunking[first.shard];
        std::uint64_t chunk = ch.chunk ? ch.chunk : (4u << 20);
        std::size_t k = i;
        for (std::uint64_t pos = first.offset; pos < run_end;) {
            std::uint64_t cut = next_cut(pos, run_end, chunk, ch.alignment);
            read_op op;
            op.offset = pos;
            op.length = cut - pos;
            op.dst = first.dst + (pos - first.offset);
            op.tag = static_cast<std::uint32_t>(so.ops.size());
            so.seg_begin.push_back(static_cast<std::uint32_t>(d.segments.size()));
            // The pieces this op overlaps, as segments of their targets.
            while (k < j) {
                const piece& p = pieces[k];
                std::uint64_t a = std::max(pos, p.offset);
                std::uint64_t b = std::min(cut, p.offset + p.length);
                d.segments.push_back({p.target, b - a, p.target_offset + (a - p.offset)});
                if (p.offset + p.length <= cut) ++k;
                else break;
            }
            so.ops.push_back(op);
            so.bytes += op.length;
            d.total_bytes += op.length;
            pos = cut;
        }
        i = j;
    }
    if (!d.shards.empty())
        d.shards.back().seg_begin.push_back(static_cast<std::uint32_t>(d.segments.size()));
    for (auto& so : d.shards) d.op_count += so.ops.size();
}

std::optional<std::pair<std::uint32_t, std::uint32_t>> find_overlap(std::span<const piece> pieces) {
    struct span_ref {
        std::uintptr_t begin, end;
        std::uint32_t target;
    };
    // Destinations usually come in memory order: then neighbours are enough.
    auto memory_order = [](const piece& a, const piece& b) { return a.dst < b.dst; };
    const piece* last = nullptr;
    bool ordered = true;
    for (const piece& p : pieces) {
        if (!p.length) continue;
        if (last && memory_order(p, *last)) {
            ordered = false;
            break;
        }
        if (last && p.dst < last->dst + last->length) return std::pair{last->target, p.target};
        last = &p;
    }
    if (ordered) return std::nullopt;
    std::vector<span_ref> v;
    v.reserve(pieces.size());
    for (const piece& p : pieces)
        if (p.length)
            v.push_back({reinterpret_cast<std::uintptr_t>(p.dst),
                         reinterpret_cast<std::uintptr_t>(p.dst) + p.length, p.target});
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.begin < b.begin; });
    for (std::size_t i = 1; i < v.size(); ++i)
        if (v[i].begin < v[i - 1].end) return std::pair{v[i - 1].target, v[i].target};
    return std::nullopt;
}

}  // namespace ringsafe::plan
