// The pipeline's fixed pool of buffers, handed to the readers one batch at a
// time (engine-internal: convert_file's stage).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "ringsafe/buffer.hpp"

namespace ringsafe::convert {

// A fixed number of buffers, allocated (huge pages, prefaulted) by the reader
// that first needs one, so the first read starts after one allocation, not
// all. claim() hands out a free buffer together with the next batch index:
// a reader that holds a batch index always holds a buffer for it, so the
// batch the writer waits for is always being read (no deadlock).
class buffer_pool {
public:
    // `stop` (the pipeline's) ends every claim once set.
    buffer_pool(std::size_t count, std::size_t size, std::size_t batches, const std::atomic<bool>& stop)
        : size_(size), batches_(batches), bufs_(count), stop_(stop) {}

    struct claim_result {
        std::size_t buf, batch;
    };
    // A buffer and the batch to read into it; nullopt when every batch is
    // claimed or `stop` is set. Adds the seconds spent waiting to `waited`.
    std::optional<claim_result> claim(double& waited);
    // Gives buffer `i` back (from any thread).
    void give(std::size_t i);
    // Wakes every waiting claim (to see `stop`).
    void wake_all();
    std::byte* data(std::size_t i) { return bufs_[i].data(); }
    std::size_t allocated();

private:
    std::size_t size_, batches_;
    std::vector<host_buffer> bufs_;  // sized once; entry i is written only by the reader that allocates it
    const std::atomic<bool>& stop_;
    std::vector<std::size_t> free_;
    std::size_t allocated_ = 0, next_batch_ = 0;
    std::mutex mu_;
    std::condition_variable cv_;
};

}  // namespace ringsafe::convert
