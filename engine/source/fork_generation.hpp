// Fork detection for what a source must not share with a forked child: io_uring
// rings (the SQ/CQ mapping is shared, liburing's cached indices are not) and
// keep-alive connections. Engine-internal.
#pragma once

#include <cstdint>

namespace ringsafe::detail {

// How many times this process is a fork() child of a process that had called
// this function before (0 in the original process). The first call installs a
// pthread_atfork child handler that bumps the count; call it when creating an
// object to remember the generation it belongs to.
std::uint64_t fork_generation() noexcept;

}  // namespace ringsafe::detail
