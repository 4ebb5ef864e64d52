// The host stand-in for a device: a thread that memcpy's staged pieces into
// host memory playing the device, with the same asynchronous contract as the
// CUDA copier, and failures that tests can inject (engine-internal).
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
    std::string describe() const override { return "the host stand-in"; }

    // Slots submitted and not yet waited for.
    std::size_t outstanding() const;
    // Staging blocks allocated and not yet freed (process-wide, all stand-ins).
    static std::size_t live_staging() noexcept;

private:
    struct job {
        std::size_t slot;
        std::vector<copy_piece> pieces;
    };
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
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace ringsafe::device
