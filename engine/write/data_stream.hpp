// A sequential byte sink on a file: bytes arrive in order and go out as large
// writes through write_ring, several in flight. Bytes are either copied into a
// bounded set of aligned staging blocks (the caller gets its buffer back at
// once) or written straight from caller memory that the caller lets the
// stream hold until completion (zero-copy). With O_DIRECT every write is
// aligned: staging blocks are aligned, the zero-copy path takes only the part
// of a caller buffer whose address is congruent with its file offset, and the
// last partial block is zero-padded (the owner truncates the file afterwards).
//
// The blocking calls (put_copy, put_owned, flush, wait_one) wait on the
// ring (write_ring::wait_one); the event-driven ones (put_copy_some, flush_start,
// reap_ready) never block, for an owner that waits on the ring's eventfd
// (write_ring::attach_eventfd) instead. Both share the same staging and ring.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "uring/write_ring.hpp"

namespace ringsafe::write {

struct stream_config {
    bool direct = false;               // the fd was opened with O_DIRECT
    std::uint64_t block_size = 8u << 20;  // bytes per write (multiple of align)
    unsigned staging_blocks = 4;       // staging memory = block_size * staging_blocks
    unsigned depth = 4;                // writes in flight
    std::uint64_t align = 4096;        // O_DIRECT offset/length/address alignment
    std::uint64_t min_zero_copy = 256u << 10;  // smaller owned buffers are copied anyway
    // O_DIRECT: extend the file with fallocate this far ahead of the writes,
    // so they land inside i_size (ext4 serialises size-extending direct
    // writes; writes into allocated space run in parallel). 0 = off. The
    // owner truncates the file to its real end afterwards.
    std::uint64_t preallocate = 256u << 20;
    std::string path;  // the file written: named in write errors, and their error::path()
};

class data_stream {
public:
    // Bytes start at file offset `start` (aligned when direct). `describe`
    // names what lives at a file offset ("tensor 'w' at offset ...") for errors.
    data_stream(int fd, std::uint64_t start, const stream_config& cfg,
                std::function<std::string(std::uint64_t)> describe);
    ~data_stream();  // waits for in-flight writes (never frees memory under the kernel)
    data_stream(const data_stream&) = delete;
    data_stream& operator=(const data_stream&) = delete;

    // Copies `bytes` into staging; returns once they are copied.
    void put_copy(std::span<const std::byte> bytes);
    // Copies what fits into free staging without waiting; returns the count
    // (0 when every block is in flight: reap completions, then call again).
    std::size_t put_copy_some(std::span<const std::byte> bytes);
    // Writes `bytes` from caller memory where alignment allows, holding `keep`
    // until those writes complete; the rest is copied.
    void put_owned(std::span<const std::byte> bytes, std::shared_ptr<const void> keep);
    // Writes out everything staged (last block zero-padded when direct) and
    // waits for all writes. Returns the end of the written region.
    std::uint64_t flush();
    // flush() without the wait: submits the last block and returns the end of
    // the written region; done once busy() is 0 (then call check()).
    std::uint64_t flush_start();

    // Writes in flight, and a blocking reap of at least one of them.
    unsigned in_flight() const noexcept { return ring_->in_flight(); }
    std::size_t busy() const noexcept { return ring_->busy(); }  // in flight or queued
    void wait_one() {
        ring_->wait_one();
        check();
    }
    // Reaps the completions already posted (non-blocking), then check().
    void reap_ready() {
        ring_->reap_ready();
        check();
    }
    // Throws the first write error seen, naming what lives at its offset.
    void check();
    // The ring (for an owner that attaches an eventfd or queues one-shot operations).
    uring::write_ring& ring() noexcept { return *ring_; }

    std::uint64_t position() const noexcept { return pos_; }  // file offset of the next byte
    std::uint64_t staged_bytes() const noexcept { return staged_; }
    std::uint64_t zero_copy_bytes() const noexcept { return zero_copy_; }
    std::uint64_t staging_peak() const noexcept { return blocks_.size() * cfg_.block_size; }

private:
    struct block {
        std::byte* mem;
        std::uint64_t file_off = 0;
        std::uint64_t fill = 0;
    };
    void on_done(std::uint64_t token, std::error_code ec, std::uint64_t offset);
    block* try_current();  // the block being filled, or null when none is free
    void submit_current(bool pad);
    void reserve_space(std::uint64_t end);  // fallocate ahead of a write ending at `end`

    stream_config cfg_;
    std::function<std::string(std::uint64_t)> describe_;
    int fd_;
    std::uint64_t pos_;
    std::uint64_t staged_ = 0, zero_copy_ = 0;
    std::uint64_t allocated_ = 0;  // file size fallocate has reached
    std::vector<block> blocks_;
    std::vector<std::size_t> free_;
    long cur_ = -1;  // index of the block being filled
    std::unordered_map<std::uint64_t, std::shared_ptr<const void>> held_;
    std::uint64_t next_owned_token_ = 0;
    std::error_code error_;
    std::uint64_t error_offset_ = 0;
    // Declared last: destroyed first, so in-flight writes finish before the
    // memory they read from is released.
    std::unique_ptr<uring::write_ring> ring_;
};

}  // namespace ringsafe::write
