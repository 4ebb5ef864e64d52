// The completion-edge fault hook (see fault_injection.hpp).
#include "uring/fault_injection.hpp"

#include <atomic>
#include <memory>
#include <mutex>

namespace ringsafe::uring {
namespace {

std::atomic<bool> installed{false};  // fast path: no lock when no test hook is set
std::mutex hook_mutex;
std::shared_ptr<const completion_fault> hook;

}  // namespace

void set_completion_fault(completion_fault fault) {
    std::lock_guard lock(hook_mutex);
    if (fault) {
        hook = std::make_shared<const completion_fault>(std::move(fault));
        installed.store(true, std::memory_order_release);
    } else {
        installed.store(false, std::memory_order_release);
        hook.reset();
    }
}

int apply_completion_fault(const completion_event& ev, int res) {
    if (!installed.load(std::memory_order_acquire)) return res;
    std::shared_ptr<const completion_fault> h;
    {
        std::lock_guard lock(hook_mutex);
        h = hook;
    }
    return h ? (*h)(ev, res) : res;
}

}  // namespace ringsafe::uring
