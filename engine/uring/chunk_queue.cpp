// chunk_queue: a shared cursor, or per-worker contiguous shares with halving steals.
#include "uring/chunk_queue.hpp"

#include "uring/read_worker.hpp"

namespace ringsafe::uring {
namespace {

constexpr std::uint64_t pack(std::uint64_t next, std::uint64_t end) { return next << 32 | end; }
constexpr std::uint64_t next_of(std::uint64_t v) { return v >> 32; }
constexpr std::uint64_t end_of(std::uint64_t v) { return v & 0xFFFFFFFFu; }

}  // namespace

void chunk_queue::share(std::size_t count) {
    streams_ = false;
    count_ = count;
    cursor_.store(0, std::memory_order_relaxed);
}

void chunk_queue::split(std::span<const read_chunk> chunks, std::size_t workers) {
    if (workers == 0 || chunks.size() >= (std::uint64_t{1} << 32)) return share(chunks.size());
    streams_ = true;
    count_ = chunks.size();
    workers_ = workers;
    shares_.reset(new std::atomic<std::uint64_t>[workers]);
    std::uint64_t total = 0;
    for (const auto& c : chunks) total += c.length;
    // Share w starts at the first chunk whose bytes begin at or past total * w / workers.
    std::size_t begin = 0;
    std::uint64_t before = 0;  // bytes of chunks [0, begin)
    for (std::size_t w = 0; w < workers; ++w) {
        const std::uint64_t goal = w + 1 == workers ? total : total / workers * (w + 1);
        std::size_t end = begin;
        while (end < chunks.size() && (before < goal || end == begin)) before += chunks[end++].length;
        if (w + 1 == workers) end = chunks.size();
        shares_[w].store(pack(begin, end), std::memory_order_relaxed);
        begin = end;
    }
}

std::size_t chunk_queue::claim(std::size_t worker) {
    if (!streams_) {
        const std::size_t i = cursor_.fetch_add(1, std::memory_order_relaxed);
        return i < count_ ? i : none;
    }
    for (;;) {
        auto& mine = shares_[worker];
        std::uint64_t v = mine.load(std::memory_order_acquire);
        while (next_of(v) < end_of(v))
            if (mine.compare_exchange_weak(v, pack(next_of(v) + 1, end_of(v)), std::memory_order_acq_rel))
                return static_cast<std::size_t>(next_of(v));
        if (steal(worker) == none) return none;
    }
}

// Moves the upper half of the largest other share into `worker`'s empty
// share (a last single chunk too: its owner may never have started); none
// when every share is empty.
std::size_t chunk_queue::steal(std::size_t worker) {
    for (;;) {
        std::size_t victim = none;
        std::uint64_t best = 0, seen = 0;
        for (std::size_t w = 0; w < workers_; ++w) {
            if (w == worker) continue;
            const std::uint64_t v = shares_[w].load(std::memory_order_acquire);
            if (end_of(v) - next_of(v) > best) best = end_of(v) - next_of(v), victim = w, seen = v;
        }
        if (victim == none) return none;
        const std::uint64_t n = next_of(seen), e = end_of(seen);
        const std::uint64_t mid = e - n == 1 ? n : n + (e - n + 1) / 2;
        if (shares_[victim].compare_exchange_strong(seen, pack(n, mid), std::memory_order_acq_rel)) {
            shares_[worker].store(pack(mid, e), std::memory_order_release);
            return worker;
        }
    }
}

}  // namespace ringsafe::uring
