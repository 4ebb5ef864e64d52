// The pipeline's buffers (buffer_pool.hpp).
#include "convert/buffer_pool.hpp"

#include <chrono>

namespace ringsafe::convert {

std::optional<buffer_pool::claim_result> buffer_pool::claim(double& waited) {
    std::unique_lock l(mu_);
    std::optional<std::size_t> buf;
    while (!buf) {
        if (stop_ || next_batch_ >= batches_) return std::nullopt;
        if (!free_.empty()) {
            buf = free_.back();
            free_.pop_back();
        } else if (allocated_ < bufs_.size()) {
            std::size_t i = allocated_++;
            l.unlock();
            try {
                bufs_[i] = host_buffer(size_);
            } catch (...) {
                l.lock();
                --allocated_;  // lets the caller report it; no other reader retries past stop
                throw;
            }
            l.lock();
            buf = i;
        } else {
            const auto t0 = std::chrono::steady_clock::now();
            cv_.wait_for(l, std::chrono::milliseconds(50));  // polls stop (set by the writer's loop)
            waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
    }
    if (stop_ || next_batch_ >= batches_) {
        free_.push_back(*buf);
        return std::nullopt;
    }
    return claim_result{*buf, next_batch_++};
}

void buffer_pool::give(std::size_t i) {
    std::lock_guard l(mu_);
    free_.push_back(i);
    cv_.notify_all();
}

void buffer_pool::wake_all() {
    std::lock_guard l(mu_);
    cv_.notify_all();
}

std::size_t buffer_pool::allocated() {
    std::lock_guard l(mu_);
    return allocated_;
}

}  // namespace ringsafe::convert
