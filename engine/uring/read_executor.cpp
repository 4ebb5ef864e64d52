// execute_reads: validation, chunking, and one thread per worker ring.
#include "uring/read_executor.hpp"

#include <algorithm>
#include <vector>

#include "ringsafe/error.hpp"
#include "uring/read_worker.hpp"
#include "uring/worker_threads.hpp"

namespace ringsafe::uring {
namespace {

// Splits each op longer than chunk_size at multiples of chunk_size (in file
// offsets), so chunk boundaries fall on aligned offsets and only an op's own
// ends are unaligned. An op that already fits (the planner cut it) stays
// whole, and no cut leaves a sliver under a quarter chunk: tiny reads between
// big ones make the kernel's readahead treat the stream as random (order-0
// page-cache folios, several times slower when the file is not cached).
std::vector<read_chunk> split(std::span<const read_op> ops, std::uint64_t chunk_size) {
    std::vector<read_chunk> chunks;
    const std::uint64_t sliver = chunk_size / 4;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const read_op& op = ops[i];
        std::uint64_t pos = op.offset;
        const std::uint64_t end = op.offset + op.length;
        while (pos < end) {
            std::uint64_t next = end;
            if (end - pos > chunk_size) {
                next = (pos / chunk_size + 1) * chunk_size;
                if (next - pos < sliver) next += chunk_size;
                if (next >= end || end - next < sliver) next = end;
            }
            chunks.push_back({pos, next - pos, op.dst + (pos - op.offset), i});
            pos = next;
        }
    }
    return chunks;
}

void validate(const read_target& t, std::span<const read_op> ops, const io_control& ctl) {
    for (const read_op& op : ops) {
        auto what = [&] {
            std::string d = ctl.describe ? ctl.describe(op.tag) : "op tag " + std::to_string(op.tag);
            return *t.path + ": " + d + " (bytes " + std::to_string(op.offset) + ", length " +
                   std::to_string(op.length) + ")";
        };
        if (op.length == 0) continue;
        if (!op.dst) raise(errc::InvalidArgument, what() + ": null destination");
        if (op.offset > t.size || op.length > t.size - op.offset)
            raise(errc::InvalidArgument,
                  what() + ": range ends past the end of the file (" + std::to_string(t.size) + " bytes)");
    }
}

}  // namespace

std::uint64_t plan_bytes(std::span<const read_op> ops) noexcept {
    std::uint64_t n = 0;
    for (const read_op& op : ops) n = op.length > ~n ? ~std::uint64_t(0) : n + op.length;
    return n;
}

void execute_reads(const ring_set& set, const read_target& given, std::span<const read_op> ops,
                   const io_control& ctl) {
    validate(given, ops, ctl);
    // A small plan: the calling thread submits and copies itself, with all
    // its reads in flight at once (a sequential stream gains nothing from
    // readahead under 1 MiB, and cold reads then overlap).
    const bool inline_plan = plan_bytes(ops) < inline_plan_bytes;
    read_target target = given;
    if (inline_plan) target.async_punt = target.streams = false;
    read_job job;
    job.target = &target;
    job.ops = ops;
    job.ctl = &ctl;
    job.chunks = split(ops, target.chunk_size);
    job.parts.assign(job.chunks.size(), 0);
    if (job.chunks.empty()) {
        if (ctl.cancel && ctl.cancel->load())
            raise(errc::Cancelled, *target.path + ": read cancelled by the caller");
        return;
    }

    // Hot reads punted to io-wq need only the calling thread's ring: its io-wq
    // spreads the copies over the cores, while a second thread brings a fresh
    // io-wq whose workers start cold, slower by half after an idle moment
    // (bench/README.md, "Rings and io-wq").
    const std::size_t useful =
        inline_plan || (!target.direct && !target.streams && target.async_punt) ? 1 : job.chunks.size();
    std::vector<worker_ring*> rings;
    rings.push_back(&set.get(0));
    for (std::size_t i = 1; i < std::min(set.count, useful); ++i) {
        try {
            rings.push_back(&set.get(i));
        } catch (...) {
            break;  // fewer workers, same result
        }
    }
    const std::size_t n = rings.size();
    // Buffered: each ring starts on its own share of the bytes. A shared
    // cursor let the first ring claim a whole small plan (32 chunks) before
    // the second thread ran, and one ring's copies (inline, or by its io-wq,
    // which runs about one copy at a time) use about one core.
    if (target.direct) job.queue.share(job.chunks.size());
    else job.queue.split(job.chunks, n);
    std::vector<read_worker> workers;
    workers.reserve(n);
    for (std::size_t i = 0; i < n; ++i) workers.emplace_back(*rings[i], job, static_cast<unsigned>(i));
    // Worker 0 runs here; the others on pooled threads. A worker that could
    // not be started leaves its share to the others (the chunk queue hands it over).
    {
        thread_group group;
        for (std::size_t i = 1; i < n; ++i)
            if (!group.start([&w = workers[i]] { w.run(); })) break;
        workers[0].run();
    }
    if (auto e = job.first_error()) std::rethrow_exception(e);
}

}  // namespace ringsafe::uring
