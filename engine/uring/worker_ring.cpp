// worker_ring: ring setup and registration.
#include "format/alignment.hpp"
#include "uring/worker_ring.hpp"

#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "ringsafe/error.hpp"
#include "source/fork_generation.hpp"

namespace ringsafe::uring {
namespace {

std::atomic<std::uint64_t> rings_made{0};

}  // namespace

std::uint64_t worker_rings_made() noexcept { return rings_made.load(std::memory_order_relaxed); }

worker_ring::worker_ring(const ring_setup& setup) : setup_(setup), generation_(detail::fork_generation()) {
    io_uring_params p{};
    // Completions are reaped by the thread that waits for them; no need for IPIs.
    p.flags = IORING_SETUP_COOP_TASKRUN;
    int r = io_uring_queue_init_params(setup.depth, &ring_, &p);
    if (r == -EINVAL) {  // older kernel without COOP_TASKRUN
        p = {};
        r = io_uring_queue_init_params(setup.depth, &ring_, &p);
    }
    if (r < 0) raise_errno(-r, "io_uring_queue_init (depth " + std::to_string(setup.depth) + ")");
    rings_made.fetch_add(1, std::memory_order_relaxed);

    if (setup.register_file && io_uring_register_files(&ring_, &setup.fd, 1) == 0) fixed_file_ = true;

    if (setup.bounce) {
        edge_stride_ = format::align_up<std::size_t>(setup.edge_size, setup.mem_align);
        edge_count_ = setup.depth;
        // A misaligned middle is bounced through at most 8 MiB per ring, which
        // bounds the engine's own memory regardless of queue depth.
        big_count_ = std::max(1u, std::min(setup.depth, 8u));
        buffer_options bo;
        bo.pages = page_kind::small;
        try {
            edge_ = host_buffer(edge_stride_ * edge_count_, bo);
            big_ = host_buffer(std::size_t(setup.big_size) * big_count_, bo);
        } catch (...) {
            io_uring_queue_exit(&ring_);
            throw;
        }
        if (setup.register_buffers) {
            iovec iov[2] = {{edge_.data(), edge_.size()}, {big_.data(), big_.size()}};
            fixed_buffers_ = io_uring_register_buffers(&ring_, iov, 2) == 0;
        }
    }
}

bool worker_ring::attach(int fd) noexcept {
    if (fixed_file_ && io_uring_register_files_update(&ring_, 0, &fd, 1) != 1) return false;
    setup_.fd = fd;
    return true;
}

bool worker_ring::detach() noexcept {
    if (setup_.fd < 0) return true;
    int none = -1;
    if (fixed_file_ && io_uring_register_files_update(&ring_, 0, &none, 1) != 1) return false;
    setup_.fd = -1;
    return true;
}

worker_ring::~worker_ring() {
    if (abandoned_ || inherited()) abandon();
    else io_uring_queue_exit(&ring_);
}

bool worker_ring::inherited() const noexcept { return generation_ != detail::fork_generation(); }

// What io_uring_queue_exit does minus anything that reads the shared ring
// memory or talks to the ring (liburing >= 2.4 reads *kring_entries and may
// unregister a registered ring fd): the sizes come from liburing's private
// copies, which fork() duplicated along with the rest of the process.
void worker_ring::abandon() noexcept {
    if (abandoned_) return;
    abandoned_ = true;
    io_uring_sq& sq = ring_.sq;
    io_uring_cq& cq = ring_.cq;
    std::size_t sqe_size = sizeof(io_uring_sqe);
    if (ring_.flags & IORING_SETUP_SQE128) sqe_size += 64;
    if (sq.sqes) ::munmap(sq.sqes, sqe_size * sq.ring_entries);
    if (sq.ring_ptr) ::munmap(sq.ring_ptr, sq.ring_sz);
    if (cq.ring_ptr && cq.ring_ptr != sq.ring_ptr) ::munmap(cq.ring_ptr, cq.ring_sz);
    if (ring_.ring_fd >= 0) ::close(ring_.ring_fd);
    ring_ = io_uring{};
    ring_.ring_fd = -1;
}

}  // namespace ringsafe::uring
