// The reader's planning calls: sizes checked, pieces handed to the planner.
#include <string>

#include "format/alignment.hpp"
#include "plan/box.hpp"
#include "plan/planner.hpp"
#include "read/reader_impl.hpp"

namespace ringsafe {
namespace {

using plan::piece;

void check_alignment(std::uint64_t alignment) {
    if (alignment == 0 || (alignment & (alignment - 1)))
        raise(errc::InvalidArgument,
              "packing alignment " + std::to_string(alignment) + " is not a power of two");
}

[[noreturn]] void too_small(const std::string& what, std::uint64_t need, std::uint64_t have) {
    raise(errc::BufferTooSmall, what + " needs " + std::to_string(need) +
                                    " bytes but its buffer holds " + std::to_string(have));
}

// Turns validated pieces into a plan: overlap check, coalescing, chunking.
read_plan finish_plan(const reader::impl& r, std::vector<piece>& pieces,
                      std::shared_ptr<detail::plan_data> d) {
    if (auto o = plan::find_overlap(pieces)) {
        const auto& a = r.tensors[d->targets[o->first].tensor].name;
        const auto& b = r.tensors[d->targets[o->second].tensor].name;
        raise(errc::InvalidArgument,
              "the destinations of '" + a + "' and '" + b + "' overlap in memory");
    }
    std::vector<plan::shard_chunking> ch(r.shards.size());
    for (std::size_t s = 0; s < ch.size(); ++s) {
        source_hints h = r.io[s]->src->hints();
        ch[s].chunk = r.opts.plan.chunk_size ? r.opts.plan.chunk_size : h.preferred_chunk;
        if (ch[s].chunk == 0) ch[s].chunk = 4u << 20;
        ch[s].alignment = h.alignment ? h.alignment : 1;
    }
    plan::build_ops(pieces, ch, r.opts.plan.coalesce, *d);
    d->reader_id = r.id;
    return read_plan(std::move(d));
}

// Rows and boxes address elements; a GGUF block type's bytes hold blocks of them.
void check_boxable(const tensor_info& t) {
    if (t.quantized())
        raise(errc::InvalidArgument, "tensor '" + t.name + "' is of GGUF block type " +
                                         std::string(ggml_type_name(t.ggml)) + " (" +
                                         std::to_string(ggml_traits(t.ggml).block_size) +
                                         " elements a block): rows and boxes of it cannot be read, only the whole "
                                         "tensor (its raw blocks)");
}

piece whole_piece(const reader::impl& r, std::uint32_t tensor, std::byte* dst, std::uint32_t target) {
    const tensor_info& t = r.tensors[tensor];
    const std::uint32_t s = r.shard_of(tensor);
    return piece{s, target, r.shards[s].data_start + t.begin, t.size(), dst, 0};
}

}  // namespace

std::uint64_t reader::box_bytes(std::string_view tensor, std::span<const dim_range> box) const {
    const tensor_info& t = at(tensor);
    check_boxable(t);
    std::uint64_t n = 0;
    for (auto& run : plan::box_runs(t, box)) n += run.length;
    return n;
}

std::uint64_t reader::packed_size(const selection& sel, std::uint64_t alignment) const {
    p_->check_selection(sel);
    check_alignment(alignment);
    std::uint64_t off = 0;
    for (auto i : sel.indices()) {
        off = format::align_up(off, alignment);
        off += p_->tensors[i].size();
    }
    return off;
}

read_plan reader::plan(const selection& sel, std::span<const std::span<std::byte>> dsts) const {
    p_->check_selection(sel);
    if (dsts.size() != sel.size())
        raise(errc::InvalidArgument, "the selection has " + std::to_string(sel.size()) +
                                         " tensors but " + std::to_string(dsts.size()) +
                                         " destination buffers were given");
    auto d = std::make_shared<detail::plan_data>();
    d->targets.reserve(sel.size());
    std::vector<piece> pieces;
    pieces.reserve(sel.size());
    for (std::size_t k = 0; k < sel.size(); ++k) {
        const auto i = sel.indices()[k];
        const tensor_info& t = p_->tensors[i];
        if (dsts[k].size() < t.size()) too_small("tensor '" + t.name + "'", t.size(), dsts[k].size());
        d->targets.push_back({i, t.size()});
        pieces.push_back(whole_piece(*p_, i, dsts[k].data(), static_cast<std::uint32_t>(k)));
    }
    return finish_plan(*p_, pieces, std::move(d));
}

read_plan reader::plan_packed(const selection& sel, std::span<std::byte> arena,
                              std::uint64_t alignment) const {
    const std::uint64_t need = packed_size(sel, alignment);
    if (arena.size() < need)
        too_small("the packed selection (" + std::to_string(sel.size()) + " tensors)", need,
                  arena.size());
    auto d = std::make_shared<detail::plan_data>();
    d->targets.reserve(sel.size());
    d->placements.reserve(sel.size());
    std::vector<piece> pieces;
    pieces.reserve(sel.size());
    std::uint64_t off = 0;
    for (std::size_t k = 0; k < sel.size(); ++k) {
        const auto i = sel.indices()[k];
        const std::uint64_t size = p_->tensors[i].size();
        off = format::align_up(off, alignment);
        d->placements.push_back({i, off, size});
        d->targets.push_back({i, size});
        pieces.push_back(whole_piece(*p_, i, arena.data() + off, static_cast<std::uint32_t>(k)));
        off += size;
    }
    return finish_plan(*p_, pieces, std::move(d));
}

read_plan reader::plan(std::span<const read_request> requests) const {
    auto d = std::make_shared<detail::plan_data>();
    d->targets.reserve(requests.size());
    std::vector<piece> pieces;
    pieces.reserve(requests.size());
    for (std::size_t k = 0; k < requests.size(); ++k) {
        const read_request& rq = requests[k];
        auto i = index_of(rq.tensor);
        if (!i) raise(errc::TensorNotFound, "tensor '" + rq.tensor + "' not found in " + p_->spec);
        const tensor_info& t = p_->tensors[*i];
        std::vector<plan::box_run> runs;
        if (rq.bytes) {
            const dim_range w = *rq.bytes;
            if (!rq.box.empty() || w.start > w.stop || w.stop > t.size())
                raise(errc::InvalidArgument,
                      "tensor '" + t.name + "': byte window [" + std::to_string(w.start) + ", " +
                          std::to_string(w.stop) + ") is not within its " + std::to_string(t.size()) +
                          " bytes" + (rq.box.empty() ? "" : " or is combined with a box"));
            if (w.stop > w.start) runs.push_back({w.start, w.stop - w.start});
        } else {
            if (!rq.box.empty()) check_boxable(t);
            runs = plan::box_runs(t, rq.box);
        }
        std::uint64_t bytes = 0;
        for (auto& run : runs) bytes += run.length;
        if (rq.dst.size() < bytes)
            too_small(rq.box.empty() && !rq.bytes ? "tensor '" + t.name + "'"
                                                  : "the slice of tensor '" + t.name + "'",
                      bytes, rq.dst.size());
        const auto target = static_cast<std::uint32_t>(k);
        d->targets.push_back({*i, bytes});
        std::uint64_t packed = 0;
        piece base = whole_piece(*p_, *i, rq.dst.data(), target);
        for (auto& run : runs) {
            pieces.push_back({base.shard, target, base.offset + run.offset, run.length, rq.dst.data() + packed,
                              packed});
            packed += run.length;
        }
    }
    return finish_plan(*p_, pieces, std::move(d));
}

void reader::read(const selection& sel, std::span<const std::span<std::byte>> dsts,
                  const read_control& ctl) {
    execute(plan(sel, dsts), ctl);
}

std::vector<placement> reader::read_packed(const selection& sel, std::span<std::byte> arena,
                                           std::uint64_t alignment, const read_control& ctl) {
    read_plan p = plan_packed(sel, arena, alignment);
    execute(p, ctl);
    return {p.placements().begin(), p.placements().end()};
}

void reader::read_rows(std::string_view tensor, std::uint64_t begin, std::uint64_t end,
                       std::span<std::byte> dst, const read_control& ctl) {
    read_request rq{std::string(tensor), {dim_range{begin, end}}, dst};
    check_boxable(at(tensor));
    if (at(tensor).shape.empty())
        raise(errc::InvalidArgument, "tensor '" + std::string(tensor) + "' is a scalar: it has no rows");
    execute(plan(std::span(&rq, 1)), ctl);
}

void reader::read_box(std::string_view tensor, std::span<const dim_range> box,
                      std::span<std::byte> dst, const read_control& ctl) {
    read_request rq{std::string(tensor), {box.begin(), box.end()}, dst};
    execute(plan(std::span(&rq, 1)), ctl);
}

}  // namespace ringsafe
