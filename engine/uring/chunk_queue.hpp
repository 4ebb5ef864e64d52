// Hands the chunks of one execute() to the worker rings (engine-internal).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace ringsafe::uring {

struct read_chunk;

// Two ways to share chunks, both lock-free:
//  shared: one cursor; whoever asks next gets the next chunk (page-cache-hot
//    reads, where order does not matter and every ring should stay full);
//  streams: worker w owns a contiguous share of the chunks (about equal in
//    bytes) and claims it front to back, so each ring reads one sequential
//    stream; a worker whose share is empty takes over the upper half of the
//    largest remaining share (and reads that in order too).
class chunk_queue {
public:
    static constexpr std::size_t none = static_cast<std::size_t>(-1);

    void share(std::size_t count);
    void split(std::span<const read_chunk> chunks, std::size_t workers);
    // The next chunk index for `worker`, or `none` when nothing is left to claim.
    std::size_t claim(std::size_t worker);

private:
    std::size_t steal(std::size_t worker);

    bool streams_ = false;
    std::size_t count_ = 0;
    std::atomic<std::size_t> cursor_{0};
    std::size_t workers_ = 0;
    std::unique_ptr<std::atomic<std::uint64_t>[]> shares_;  // per worker: next << 32 | end
};

}  // namespace ringsafe::uring
