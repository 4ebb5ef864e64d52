// Thread starts that report a refusal (see thread_start.hpp).
#include "read/thread_start.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <system_error>

namespace ringsafe::read {
namespace {

std::atomic<bool> installed{false};  // fast path: no lock when no test hook is set
std::mutex hook_mutex;
std::shared_ptr<const std::function<bool(std::uint64_t)>> hook;
std::uint64_t starts = 0;  // starts asked since the hook was installed (under hook_mutex)

bool refused_by_hook() {
    if (!installed.load(std::memory_order_acquire)) return false;
    std::shared_ptr<const std::function<bool(std::uint64_t)>> h;
    std::uint64_t n = 0;
    {
        std::lock_guard lock(hook_mutex);
        h = hook;
        n = starts++;
    }
    return h && (*h)(n);
}

}  // namespace

std::thread start_thread(std::function<void()> fn) {
    if (refused_by_hook()) throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    return std::thread(std::move(fn));
}

std::thread try_start_thread(std::function<void()> fn) noexcept {
    try {
        return start_thread(std::move(fn));
    } catch (...) {  // std::system_error (EAGAIN), or no memory for the thread's state
        return {};
    }
}

std::vector<std::thread> start_threads(std::size_t count, const std::function<void()>& work) noexcept {
    std::vector<std::thread> out;
    try {
        out.reserve(count);
    } catch (...) {
        return out;
    }
    for (std::size_t i = 0; i < count; ++i) {
        std::thread t = try_start_thread(work);
        if (!t.joinable()) break;
        out.push_back(std::move(t));
    }
    return out;
}

void set_thread_start_fault(std::function<bool(std::uint64_t)> refuse) {
    std::lock_guard lock(hook_mutex);
    starts = 0;
    if (refuse) {
        hook = std::make_shared<const std::function<bool(std::uint64_t)>>(std::move(refuse));
        installed.store(true, std::memory_order_release);
    } else {
        installed.store(false, std::memory_order_release);
        hook.reset();
    }
}

}  // namespace ringsafe::read
