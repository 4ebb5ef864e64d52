// One io_uring plus what it keeps registered: the file and, for O_DIRECT,
// the bounce buffers (engine-internal). File sources lease them from the
// process-wide pool (uring/ring_pool.hpp), which points an idle ring at the
// next file with attach().
#pragma once

#include <liburing.h>

#include <cstddef>
#include <cstdint>

#include "ringsafe/buffer.hpp"

namespace ringsafe::uring {

// How a worker_ring is set up.
struct ring_setup {
    int fd = -1;                  // the file every read targets
    unsigned depth = 32;          // SQ entries = reads in flight
    bool register_file = true;    // IOSQE_FIXED_FILE with index 0
    bool bounce = false;          // allocate bounce buffers (O_DIRECT)
    bool register_buffers = true; // register them (IORING_OP_READ_FIXED)
    std::uint32_t edge_size = 4096;   // one aligned block, for unaligned range edges
    std::uint32_t mem_align = 4096;   // alignment of each bounce slot
    std::uint64_t big_size = 1u << 20;  // slot for bouncing a misaligned middle
};

class worker_ring {
public:
    // Creates the ring; throws ringsafe::error (system_category) when io_uring
    // is unavailable or registration fails.
    explicit worker_ring(const ring_setup& setup);
    // Tears the ring down with io_uring_queue_exit, or, in a fork() child
    // (inherited()), as abandon() does.
    ~worker_ring();
    worker_ring(const worker_ring&) = delete;
    worker_ring& operator=(const worker_ring&) = delete;

    // True in a fork() child of the process that made this ring: the child
    // shares the parent's SQ/CQ memory but not liburing's cached head/tail, so
    // it must neither submit, wait nor drain here; only abandon() it.
    bool inherited() const noexcept;
    // Unmaps the child's copy of the ring memory and closes its ring fd,
    // without submitting or waiting (the parent's ring is untouched). After
    // this, only destruction is allowed. Idempotent.
    void abandon() noexcept;

    // Points the ring at `fd`: replaces registered file 0 (one
    // io_uring_register_files_update) or, unregistered, the fd put in SQEs.
    // False when the kernel refused; the ring must then be destroyed.
    bool attach(int fd) noexcept;
    // Drops registered file 0, so that an idle ring holds no reference to a
    // file its owner closed. False when the kernel refused (destroy the ring).
    bool detach() noexcept;
    // The file the ring reads (-1 after detach()) and how it was made.
    int fd() const noexcept { return setup_.fd; }
    const ring_setup& setup() const noexcept { return setup_; }

    io_uring* ring() noexcept { return &ring_; }
    unsigned depth() const noexcept { return setup_.depth; }
    // The fd to put in an SQE and whether to set IOSQE_FIXED_FILE.
    int sqe_fd() const noexcept { return fixed_file_ ? 0 : setup_.fd; }
    bool fixed_file() const noexcept { return fixed_file_; }
    bool fixed_buffers() const noexcept { return fixed_buffers_; }

    // Bounce slots: `edge_count()` slots of edge_size() bytes (registered
    // buffer index 0) and big_count() slots of big_size() bytes (index 1).
    unsigned edge_count() const noexcept { return edge_count_; }
    unsigned big_count() const noexcept { return big_count_; }
    std::uint64_t edge_size() const noexcept { return setup_.edge_size; }
    std::uint64_t big_size() const noexcept { return setup_.big_size; }
    std::byte* edge_slot(unsigned i) noexcept { return edge_.data() + std::size_t(i) * edge_stride_; }
    std::byte* big_slot(unsigned i) noexcept { return big_.data() + std::size_t(i) * setup_.big_size; }

private:
    ring_setup setup_;
    io_uring ring_{};
    std::uint64_t generation_ = 0;  // fork_generation() at creation
    bool abandoned_ = false;
    bool fixed_file_ = false;
    bool fixed_buffers_ = false;
    unsigned edge_count_ = 0, big_count_ = 0;
    std::size_t edge_stride_ = 0;
    host_buffer edge_, big_;
};

// Rings this process has made so far (for tests and benchmarks of the pool).
std::uint64_t worker_rings_made() noexcept;

}  // namespace ringsafe::uring
