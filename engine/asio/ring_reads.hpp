// The async file-read engine (engine-internal): one io_uring whose
// completions wake the caller's io_context through an eventfd watched by an
// Asio descriptor. Buffered and O_DIRECT files (the latter through per-slot
// aligned bounce buffers where a piece cannot land in the caller's buffer),
// and single operations (async_open's openat and header reads).
// Every method runs on the strand given at construction.
#pragma once

#include <liburing.h>

#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/strand.hpp>

#include "asio/file_job.hpp"

namespace ringsafe::asio::detail {

using engine_strand = boost::asio::strand<boost::asio::any_io_executor>;

class ring_reads : public std::enable_shared_from_this<ring_reads> {
public:
    // Creates the ring (`depth` reads in flight) and its eventfd. Throws
    // ringsafe::error (system_category) when io_uring or eventfd fail.
    ring_reads(engine_strand strand, unsigned depth);
    // Cancels and waits (blocking) for reads still in flight, which only
    // happens when the io_context was stopped with operations outstanding.
    ~ring_reads();
    ring_reads(const ring_reads&) = delete;
    ring_reads& operator=(const ring_reads&) = delete;

    // Whether O_DIRECT reads with these alignments can run here (the slots'
    // bounce buffers are bounce_size bytes aligned to bounce_align).
    static bool fits_direct(std::uint32_t align, std::uint32_t mem_align) noexcept;

    // Queues a job's ops; they are submitted as ring slots free up.
    void start(std::shared_ptr<file_job> job);
    // Stops a job: nothing more is submitted, its in-flight reads get
    // IORING_OP_ASYNC_CANCEL; on_done runs once every one of them completed.
    void cancel(file_job& job);

    // One operation besides the reads (async_open: openat, the header
    // read): `prep` fills the SQE; `done` is posted to the strand with the
    // CQE's result (-EBUSY when no SQE could be had, -EIO when the ring
    // failed). `keep` (the memory the kernel uses) lives until then, or
    // until the ring is gone. Returns an id for cancel_single().
    std::uint64_t submit_single(const std::function<void(io_uring_sqe*)>& prep, std::shared_ptr<void> keep,
                                std::function<void(int)> done);
    // IORING_OP_ASYNC_CANCEL for a single operation still in flight (its done
    // still runs, with -ECANCELED or the result it got first).
    void cancel_single(std::uint64_t id);

private:
    struct single {
        std::shared_ptr<void> keep;
        std::function<void(int)> done;
    };
    struct slot {
        std::shared_ptr<file_job> job;  // null when free
        std::size_t op = 0;
        std::uint64_t pos = 0;           // next file offset of this op to read
        std::uint32_t generation = 0;    // tells reuses of the slot apart
        unsigned retries = 0;
        // The read in flight: where it starts in the file, its length, and
        // whether it targets the slot's bounce buffer (O_DIRECT pieces that
        // cannot land in the caller's buffer) instead of the caller's buffer.
        std::uint64_t read_at = 0;
        std::uint64_t read_len = 0;
        bool bounced = false;
    };
    struct free_deleter {
        void operator()(std::byte* p) const noexcept { std::free(p); }
    };
    static constexpr std::size_t bounce_size = std::size_t{1} << 20;
    static constexpr std::size_t bounce_align = 4096;

    void pump();
    void submit_read(unsigned id);
    std::byte* place_direct(unsigned id);
    static std::uint64_t wanted_bytes(const slot& s, const read_op& op, int res);
    void flush();
    void arm();
    void on_ready();
    void handle(unsigned id, int res);
    void fail(file_job& job, std::error_code ec, std::string message);
    void finish_if_idle(file_job& job);
    void fail_everything(std::error_code ec, const std::string& what);

    engine_strand strand_;
    io_uring ring_{};
    bool ring_ok_ = false;
    boost::asio::posix::stream_descriptor event_;
    std::vector<slot> slots_;
    // One per slot, allocated when the slot first serves an O_DIRECT job;
    // freed only after the ring is gone (the kernel may still write into it).
    std::vector<std::unique_ptr<std::byte, free_deleter>> bounces_;
    std::vector<unsigned> free_;
    std::deque<std::shared_ptr<file_job>> queue_;  // jobs with ops left to submit
    unsigned in_flight_ = 0;  // reads owned by the kernel (cancels are not counted)
    bool armed_ = false;
    std::error_code broken_;  // the ring failed; later jobs fail at once
    std::map<std::uint64_t, single> singles_;  // in flight, by user_data
    std::uint64_t next_single_ = 0;
    std::vector<std::shared_ptr<void>> orphaned_;  // singles' memory after a ring failure, freed with the ring
};

}  // namespace ringsafe::asio::detail
