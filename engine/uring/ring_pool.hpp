// The process-wide pool of idle worker rings (engine-internal): a file source
// leases its first ring until it closes and its other rings for one
// execute(), and hands them back, so that the next reader, of this file or
// another, finds a ring ready instead of making one (io_uring_setup, mmap,
// file and bounce-buffer registration).
#pragma once

#include <cstdint>
#include <memory>

#include "ringsafe/file_source.hpp"
#include "uring/worker_ring.hpp"

namespace ringsafe::uring {

// The switch itself is public (ringsafe/file_source.hpp).
using ringsafe::ring_pool_enabled;
using ringsafe::set_ring_pool_enabled;

// A fresh id for a file owner (a source): rings remember the owner whose
// file they were last attached to.
std::uint64_t new_ring_owner() noexcept;

// A worker_ring on loan. Destroying it (or reset()) hands the ring back to
// the pool when it came from there, the pool is open and has room, and the
// ring was made in this process (not inherited across fork()); otherwise the
// ring is destroyed (an inherited one abandoned).
class ring_lease {
public:
    ring_lease() = default;
    ring_lease(std::unique_ptr<worker_ring> ring, std::uint64_t owner, bool pooled) noexcept
        : ring_(std::move(ring)), owner_(owner), pooled_(pooled) {}
    ring_lease(ring_lease&& o) noexcept = default;
    ring_lease& operator=(ring_lease&& o) noexcept;
    ~ring_lease() { reset(); }

    worker_ring& operator*() const noexcept { return *ring_; }
    worker_ring* operator->() const noexcept { return ring_.get(); }
    explicit operator bool() const noexcept { return ring_ != nullptr; }
    void reset() noexcept;

private:
    std::unique_ptr<worker_ring> ring_;
    std::uint64_t owner_ = 0;
    bool pooled_ = false;
};

// A ring made like `setup` (same depth, registration and bounce buffers),
// attached to setup.fd on behalf of `owner`: an idle one from the pool when
// the pool is on (one still attached to this owner's fd first: no syscall),
// else a new one. Throws like worker_ring's constructor.
ring_lease take_ring(const ring_setup& setup, std::uint64_t owner);

// Detaches the idle rings still attached to `owner`'s files (call it before
// the owner closes them: a registered file keeps the file open).
void release_owner(std::uint64_t owner) noexcept;

// Idle rings in the pool now (for tests).
std::size_t idle_rings() noexcept;

}  // namespace ringsafe::uring
