// The host stand-in for a device: a thread that memcpy's staged pieces into
// host memory playing the device, with the same asynchronous contract as the
// CUDA copier, failures that tests can inject, and a trace of its steps
// (waits, copies, the final event) in the order it takes them (engine-internal).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "device/copier.hpp"

namespace ringsafe::device {

class host_copier final : public copier {
public:
    host_copier(std::size_t slots, stand_in_hooks hooks = {});
    ~host_copier() override;  // finishes queued copies, then joins the thread

    staging_block allocate_staging(std::size_t size) override;
    bool needs_staging(const void*) override { return true; }  // all destinations play device memory
    void submit(std::size_t slot, std::vector<copy_piece> pieces) override;
    void wait(std::size_t slot) override;
    // Queue the stream wait and the final event as steps of their own, taken
    // in order with the copies (traced; there is no stream to wait on).
    void after_stream(void* stream) override;
    void before_stream(void* stream) override;  // returns once its event step was taken
    std::string describe() const override { return "the host stand-in"; }

    // Slots submitted and not yet waited for.
    std::size_t outstanding() const;
    // Staging blocks allocated and not yet freed (process-wide, all stand-ins).
    static std::size_t live_staging() noexcept;

private:
    struct job {
        enum class kind { copies, wait_stream, record_done } what = kind::copies;
        std::size_t slot = 0;
        std::vector<copy_piece> pieces;
        void* stream = nullptr;
    };
    void trace(const std::string& step) const {
        if (hooks_.trace) hooks_.trace(step);
    }
    struct slot_state {
        bool busy = false;    // submitted, not waited for
        bool done = false;    // its copies ran
        std::exception_ptr error;
    };
    void run();

    stand_in_hooks hooks_;
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::deque<job> queue_;
    std::vector<slot_state> slots_;
    std::uint64_t next_piece_ = 0;  // copier thread only
    std::uint64_t records_queued_ = 0, records_taken_ = 0;  // record_done steps
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace ringsafe::device
