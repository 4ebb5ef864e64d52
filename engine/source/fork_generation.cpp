// fork_generation: a pthread_atfork child handler bumps a process-wide counter.
#include "source/fork_generation.hpp"

#include <pthread.h>

#include <atomic>

namespace ringsafe::detail {
namespace {

std::atomic<std::uint64_t> generation{0};

void on_fork_child() noexcept { generation.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

std::uint64_t fork_generation() noexcept {
    // A function-local static: installed once, thread-safe, before any ring
    // that records a generation exists.
    static const bool installed = pthread_atfork(nullptr, nullptr, on_fork_child) == 0;
    (void)installed;
    return generation.load(std::memory_order_relaxed);
}

}  // namespace ringsafe::detail
