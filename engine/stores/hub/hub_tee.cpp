// A Hub source's bytes written into its cache entry and hashed as they land (hub_tee.hpp).
#include "stores/hub/hub_tee.hpp"

#include <algorithm>
#include <numeric>

#include "http/fetch_pieces.hpp"

namespace ringsafe::stores {
namespace {

constexpr unsigned nudge_shift = 20;  // the thread is woken for the prefix every MiB a piece grows

}  // namespace

tee_pieces cut_for_tee(std::span<const read_op> ops, std::uint64_t size, const std::string& name, const http_options& o,
                       bool hashed, const std::function<std::string(std::uint32_t)>& describe) {
    tee_pieces out;
    const std::deque<http::piece> plain = http::split_into_pieces(ops, size, name, o, describe);  // checks the ranges
    if (!hashed) {
        for (const http::piece& p : plain) {
            out.pieces.push_back({p.offset, p.length, p.dst, ops[p.op_index].tag, ops[p.op_index].one_request});
            out.op_of.push_back(p.op_index);
        }
        return out;
    }
    std::uint64_t remaining = 0;
    for (const read_op& op : ops) remaining += op.length;
    // At most engine/http's request size for these bytes, so that it cuts none of these again.
    const std::uint64_t most = http::piece_size(remaining, o);
    const std::uint64_t least = std::min<std::uint64_t>(most, 1u << 20);
    const std::uint64_t share = 2ull * std::max(1u, o.connections_per_origin);
    for (std::size_t i = 0; i < ops.size(); ++i)
        for (std::uint64_t at = 0; at < ops[i].length;) {
            // An op asked for in one request (a header read: the next read depends on it) stays whole.
            const std::uint64_t n = ops[i].one_request ? ops[i].length - at
                                                       : std::min(ops[i].length - at, std::clamp(remaining / share, least, most));
            out.pieces.push_back({ops[i].offset + at, n, ops[i].dst + at, ops[i].tag, ops[i].one_request});
            out.op_of.push_back(i);
            at += n;
            remaining -= n;
        }
    return out;
}

hub_tee::hub_tee(std::shared_ptr<hub_cache_entry> entry, std::shared_ptr<blob_digest> digest,
                 std::span<const read_op> pieces)
    : entry_(std::move(entry)), digest_(std::move(digest)), pieces_(pieces),
      landed_(new std::atomic<std::uint64_t>[pieces.size()]), order_(pieces.size()), written_(pieces.size(), 0) {
    for (std::size_t i = 0; i < pieces.size(); ++i) landed_[i].store(0, std::memory_order_relaxed);
    std::iota(order_.begin(), order_.end(), std::size_t{0});
    std::stable_sort(order_.begin(), order_.end(),
                     [&](std::size_t a, std::size_t b) { return pieces_[a].offset < pieces_[b].offset; });
    thread_ = std::thread([this] { run(); });
}

hub_tee::~hub_tee() {
    {
        std::lock_guard lock(mutex_);
        abandoned_ = true;
        ready_.clear();
    }
    stop();
}

void hub_tee::landed(std::size_t piece, std::uint64_t bytes) {
    const std::uint64_t before = landed_[piece].fetch_add(bytes, std::memory_order_acq_rel), now = before + bytes;
    if (now == pieces_[piece].length) {
        std::lock_guard lock(mutex_);
        ready_.push_back(piece);
        wake_.notify_one();
    } else if (digest_ && (before >> nudge_shift) != (now >> nudge_shift)) {
        std::lock_guard lock(mutex_);
        nudged_ = true;
        wake_.notify_one();
    }
}

void hub_tee::advance() {
    if (!digest_) return;
    while (cursor_ < order_.size()) {
        const std::size_t i = order_[cursor_];
        const read_op& op = pieces_[i];
        const std::uint64_t hashed = digest_->hashed();
        if (op.offset > hashed) return;  // a gap: bytes this read does not have (yet)
        const std::uint64_t got = landed_[i].load(std::memory_order_acquire), end = op.offset + got;
        if (end > hashed)
            digest_->add(hashed, {op.dst + (hashed - op.offset), static_cast<std::size_t>(end - hashed)});
        if (got < op.length) return;  // the rest of it lands later
        ++cursor_;
    }
}

void hub_tee::run() {
    for (;;) {
        std::vector<std::size_t> whole;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || nudged_ || !ready_.empty(); });
            if (abandoned_ || (stopping_ && ready_.empty() && !nudged_)) return;
            whole.assign(ready_.begin(), ready_.end());
            ready_.clear();
            nudged_ = false;
            if (failed_) continue;
        }
        try {
            advance();  // first: a write that completes the file then finds its digest done
            if (entry_)
                for (std::size_t i : whole) {
                    entry_->write(pieces_[i].offset, {pieces_[i].dst, static_cast<std::size_t>(pieces_[i].length)});
                    written_[i] = 1;
                }
        } catch (...) {
            std::lock_guard lock(mutex_);
            failed_ = std::current_exception();
        }
    }
}

void hub_tee::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
}

void hub_tee::finish() {
    stop();  // the thread drains what is ready, then joins
    if (failed_) std::rethrow_exception(failed_);
    advance();
    if (entry_)
        for (std::size_t i = 0; i < pieces_.size(); ++i)
            if (!written_[i]) entry_->write(pieces_[i].offset, {pieces_[i].dst, static_cast<std::size_t>(pieces_[i].length)});
}

}  // namespace ringsafe::stores
