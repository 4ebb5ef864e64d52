// The one blocking completion-drain loop: waits until nothing a ring owns is
// in flight (a ring's destructor, a worker that stopped early). Signals
// (-EINTR, -EAGAIN) are waited through; a broken ring ends the wait.
#pragma once

#include <liburing.h>

#include <cerrno>

namespace ringsafe::uring {

// Reaps completions until `in_flight` is zero. `retires(cqe)` runs for each
// CQE before it is marked seen and says whether it retires one of the
// `in_flight` operations (a cancel request's CQE does not). Returns false
// when waiting failed (the ring is broken; nothing more can be waited for).
template <class Retires>
bool drain_completions(io_uring& ring, unsigned& in_flight, Retires&& retires) {
    while (in_flight > 0) {
        io_uring_cqe* cqe = nullptr;
        const int r = io_uring_wait_cqe(&ring, &cqe);
        if (r == -EINTR || r == -EAGAIN) continue;
        if (r < 0) return false;
        if (retires(cqe)) --in_flight;
        io_uring_cqe_seen(&ring, cqe);
    }
    return true;
}

}  // namespace ringsafe::uring
