// One worker of the io_uring read executor: claims chunks from the job's
// chunk_queue and keeps its ring's queue full (engine-internal).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ringsafe/source.hpp"
#include "uring/chunk_queue.hpp"
#include "uring/read_executor.hpp"
#include "uring/worker_ring.hpp"

namespace ringsafe::uring {

// A piece of one op: the whole op, or (for an op longer than chunk_size) a
// piece cut at multiples of chunk_size in file offsets.
struct read_chunk {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::byte* dst = nullptr;
    std::size_t op = 0;  // index into the ops span
};

// What all workers of one execute() share.
struct read_job {
    const read_target* target = nullptr;
    std::span<const read_op> ops;
    const io_control* ctl = nullptr;
    std::vector<read_chunk> chunks;
    std::vector<std::uint32_t> parts;  // reads left per chunk; touched only by the worker that claimed it
    chunk_queue queue;
    std::atomic<bool> stop{false};

    // Records the first failure and stops every worker's submissions.
    void fail(std::exception_ptr e);
    std::exception_ptr first_error();
    // ctl->describe(tag), or "op tag N" without one.
    std::string describe(std::size_t op) const;

private:
    std::mutex mutex_;
    std::exception_ptr first_;
};

class read_worker {
public:
    // Worker `index` of the job (its stream in streams mode).
    read_worker(worker_ring& ring, read_job& job, unsigned index);
    // Runs until every claimable chunk is done or the job stopped, and no read is in flight.
    void run() noexcept;

private:
    enum class kind : std::uint8_t { into_dst, edge_bounce, big_bounce };
    struct request {
        std::size_t chunk = 0;
        std::uint64_t start = 0;     // file offset that lands at `base`
        std::uint64_t pos = 0;       // next file offset to read
        std::uint64_t end = 0;       // end of this read (direct: may pass EOF)
        std::uint64_t need_end = 0;  // done once pos reaches this
        std::byte* base = nullptr;   // dst, or the bounce slot
        kind how = kind::into_dst;
        int slot = -1;               // bounce slot index, once acquired
        std::byte* copy_dst = nullptr;  // bounces: file bytes [copy_from, +copy_len) go here
        std::uint64_t copy_from = 0;
        std::uint64_t copy_len = 0;
        unsigned retries = 0;
    };

    void loop();
    bool claim();
    void expand_direct(std::size_t index, const read_chunk& c);
    bool acquire_slot(request& r);
    void release_slot(request& r);
    void prep(unsigned id);
    void handle(unsigned id, int res);
    void complete(request& r);
    void drain() noexcept;
    [[noreturn]] void raise_at(std::error_code ec, const request& r, std::uint64_t at, const std::string& what);

    worker_ring& ring_;
    read_job& job_;
    unsigned index_ = 0;
    unsigned max_in_flight_ = 0;
    std::vector<request> slots_;  // by SQE user_data
    std::vector<unsigned> free_ids_;
    std::vector<unsigned> free_edge_, free_big_;
    std::deque<request> ready_;
    unsigned in_flight_ = 0;
    unsigned unsubmitted_ = 0;
};

}  // namespace ringsafe::uring
