// worker_ring: ring setup and registration.
#include "format/alignment.hpp"
#include "uring/worker_ring.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <string>

#include "ringsafe/error.hpp"

namespace ringsafe::uring {

worker_ring::worker_ring(const ring_setup& setup) : setup_(setup) {
    io_uring_params p{};
    // Completions are reaped by the thread that waits for them; no need for IPIs.
    p.flags = IORING_SETUP_COOP_TASKRUN;
    int r = io_uring_queue_init_params(setup.depth, &ring_, &p);
    if (r == -EINVAL) {  // older kernel without COOP_TASKRUN
        p = {};
        r = io_uring_queue_init_params(setup.depth, &ring_, &p);
    }
    if (r < 0) raise_errno(-r, "io_uring_queue_init (depth " + std::to_string(setup.depth) + ")");

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

worker_ring::~worker_ring() { io_uring_queue_exit(&ring_); }

}  // namespace ringsafe::uring
