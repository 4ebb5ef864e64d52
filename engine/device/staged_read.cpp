// The staging pipeline: fill a free staging buffer with one read plan (byte
// windows of the next tensors), hand its pieces to the copier, go on reading
// into the next buffer while they copy; a full ring waits for its oldest buffer.
#include "device/staged_read.hpp"

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "format/alignment.hpp"

namespace ringsafe::device {
namespace {

// A staging buffer holds at most this many windows (one read request each), so
// that a plan of many tiny tensors stays small.
constexpr std::size_t max_windows = 4096;
// Windows start on this alignment inside a staging buffer.
constexpr std::size_t window_alignment = 256;

struct window {
    std::size_t target;   // index into the selection
    std::uint64_t bytes;  // copied by this window
};

struct slot {
    bool busy = false;            // submitted, not yet waited for
    std::vector<window> windows;  // what its copies complete
};

[[noreturn]] void cancelled(std::uint64_t done, std::uint64_t total) {
    raise(errc::Cancelled, "read_to_device: cancelled after " + std::to_string(done) + " of " +
                               std::to_string(total) + " bytes were in place");
}

}  // namespace

void check_options(const device_options& opts) {
    if (opts.staging_size == 0 || opts.staging_count < 2 || opts.staging_count > 1024)
        raise(errc::InvalidArgument, "read_to_device: staging_size must be at least 1 and staging_count in 2..1024 (got " +
                                         std::to_string(opts.staging_size) + " and " +
                                         std::to_string(opts.staging_count) + ")");
    if (opts.device < 0) raise(errc::InvalidArgument, "read_to_device: device index " + std::to_string(opts.device) + " is negative");
}

void check_targets(const reader& r, const selection& sel, std::span<const device_span> dsts,
                   const device_options& opts) {
    check_options(opts);
    // The reader's own checks (selection, count, sizes, overlap): planning touches no memory.
    std::vector<std::span<std::byte>> spans;
    spans.reserve(dsts.size());
    for (const auto& d : dsts) spans.emplace_back(static_cast<std::byte*>(d.data), d.size);
    (void)r.plan(sel, spans);
}

device_read_stats staged_read(reader& r, const selection& sel, std::span<const device_span> dsts,
                              const device_options& opts, const read_control& ctl, copier& c,
                              std::vector<staging_block>& memory) {
    const auto tensors = r.tensors();
    const auto idx = sel.indices();
    const auto info = [&](std::size_t target) -> const tensor_info& { return tensors[idx[target]]; };
    const auto stop = [&] { return ctl.cancel && ctl.cancel->load(); };

    device_read_stats stats;
    std::uint64_t total = 0, done = 0;
    std::vector<std::uint64_t> left(idx.size());
    std::vector<std::size_t> direct, staged;
    for (std::size_t t = 0; t < idx.size(); ++t) {
        left[t] = info(t).size();
        total += left[t];
        if (left[t] == 0) continue;
        (c.needs_staging(dsts[t].data) ? staged : direct).push_back(t);
    }
    if (stop()) cancelled(0, total);
    for (std::size_t t = 0; t < idx.size(); ++t)
        if (left[t] == 0 && ctl.on_tensor_done) ctl.on_tensor_done(t, info(t));

    // Host destinations: one plan straight into them.
    if (!direct.empty()) {
        std::vector<read_request> reqs;
        for (std::size_t t : direct)
            reqs.push_back({info(t).name, {}, {static_cast<std::byte*>(dsts[t].data), left[t]}});
        read_control dc;
        dc.cancel = ctl.cancel;
        if (ctl.on_progress) dc.on_progress = [&](std::uint64_t d, std::uint64_t) { ctl.on_progress(d, total); };
        if (ctl.on_tensor_done)
            dc.on_tensor_done = [&](std::size_t k, const tensor_info& ti) { ctl.on_tensor_done(direct[k], ti); };
        r.execute(r.plan(reqs), dc);
        for (std::size_t t : direct) done += std::exchange(left[t], 0);
        stats.direct_bytes = done;
    }
    if (staged.empty()) return stats;

    std::vector<slot> ring(opts.staging_count);
    if (memory.size() < ring.size()) memory.resize(ring.size());
    // Waits for slot `s`'s copies; its windows' bytes are then on the device.
    const auto retire = [&](slot& s) {
        if (!s.busy) return;
        s.busy = false;
        c.wait(static_cast<std::size_t>(&s - ring.data()));
        for (const window& w : s.windows) {
            done += w.bytes;
            if ((left[w.target] -= w.bytes) == 0 && ctl.on_tensor_done) ctl.on_tensor_done(w.target, info(w.target));
        }
        if (ctl.on_progress) ctl.on_progress(done, total);
    };
    // On failure: every submitted copy completes before its staging memory is freed.
    const auto drain = [&] {
        for (auto& s : ring) {
            if (!s.busy) continue;
            s.busy = false;
            try {
                c.wait(static_cast<std::size_t>(&s - ring.data()));
            } catch (...) {  // the first error is the one reported
            }
        }
    };

    try {
        // The copies wait for what the caller's stream queued before this call
        // (kernels still reading parameters about to be overwritten, memory the
        // caching allocator handed out again).
        c.after_stream(opts.stream);
        std::size_t next = 0;          // the slot to fill next (round robin = submission order)
        std::size_t k = 0;             // position in `staged`
        std::uint64_t offset = 0;      // bytes of staged[k] already planned
        read_control rc;
        rc.cancel = ctl.cancel;
        while (k < staged.size()) {
            if (stop()) cancelled(done, total);
            slot& s = ring[next];
            const std::size_t slot_index = next;
            next = (next + 1) % ring.size();
            retire(s);
            staging_block& block = memory[slot_index];
            if (!block.data()) block = c.allocate_staging(opts.staging_size);
            s.windows.clear();
            std::vector<read_request> reqs;
            std::vector<copy_piece> pieces;
            std::size_t used = 0;
            while (k < staged.size() && reqs.size() < max_windows && used < opts.staging_size) {
                const std::size_t t = staged[k];
                const std::uint64_t n = std::min<std::uint64_t>(info(t).size() - offset, opts.staging_size - used);
                std::byte* at = block.data() + used;
                reqs.push_back({info(t).name, {}, {at, n}, dim_range{offset, offset + n}});
                pieces.push_back({static_cast<std::byte*>(dsts[t].data) + offset, at, n, &info(t).name, offset});
                s.windows.push_back({t, n});
                stats.staged_bytes += n;
                used = format::align_up<std::size_t>(used + n, window_alignment);
                offset += n;
                if (offset == info(t).size()) ++k, offset = 0;
            }
            r.execute(r.plan(reqs), rc);
            stats.copies += pieces.size();
            ++stats.batches;
            s.busy = true;  // before submit: a copy it started before failing is waited for too
            c.submit(slot_index, std::move(pieces));
        }
        for (std::size_t i = 0; i < ring.size(); ++i) retire(ring[(next + i) % ring.size()]);
        // What the caller queues on its stream from here on runs after every copy.
        c.before_stream(opts.stream);
    } catch (...) {
        drain();
        throw;
    }
    return stats;
}

}  // namespace ringsafe::device
