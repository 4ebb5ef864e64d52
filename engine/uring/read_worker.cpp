// read_worker: the per-ring submission/completion loop.
#include "uring/read_worker.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "format/alignment.hpp"
#include "ringsafe/error.hpp"
#include "uring/completion_drain.hpp"
#include "uring/direct_split.hpp"
#include "uring/fault_injection.hpp"
#include "uring/transient_result.hpp"
#include "uring/refused_work.hpp"

namespace ringsafe::uring {
namespace {

constexpr unsigned max_retries = max_transient_retries;

}  // namespace

void read_job::fail(std::exception_ptr e) {
    std::lock_guard lock(mutex_);
    if (!first_) first_ = e;
    stop.store(true, std::memory_order_relaxed);
}

std::exception_ptr read_job::first_error() {
    std::lock_guard lock(mutex_);
    return first_;
}

std::string read_job::describe(std::size_t op) const {
    const std::uint32_t tag = ops[op].tag;
    if (ctl->describe) {
        try {
            return ctl->describe(tag);
        } catch (...) {
        }
    }
    return "op tag " + std::to_string(tag);
}

read_worker::read_worker(worker_ring& ring, read_job& job, unsigned index)
    : ring_(ring), job_(job), index_(index) {
    // Streams: one read at a time keeps the kernel's readahead sequential.
    max_in_flight_ = job.target->streams ? std::max(1u, std::min(job.target->stream_depth, ring.depth()))
                                         : ring.depth();
    slots_.resize(ring.depth());
    for (unsigned i = ring.depth(); i-- > 0;) free_ids_.push_back(i);
    for (unsigned i = ring.edge_count(); i-- > 0;) free_edge_.push_back(i);
    for (unsigned i = ring.big_count(); i-- > 0;) free_big_.push_back(i);
}

void read_worker::run() noexcept {
    try {
        loop();
    } catch (...) {
        job_.fail(std::current_exception());
        drain();
    }
}

void read_worker::loop() {
    io_uring* ring = ring_.ring();
    for (;;) {
        if (job_.ctl->cancel && job_.ctl->cancel->load(std::memory_order_relaxed) &&
            !job_.stop.load(std::memory_order_relaxed))
            job_.fail(std::make_exception_ptr(
                error(errc::Cancelled, *job_.target->path + ": read cancelled by the caller")));
        while (!job_.stop.load(std::memory_order_relaxed) && !free_ids_.empty() && in_flight_ < max_in_flight_) {
            if (ready_.empty() && !claim()) break;
            if (!acquire_slot(ready_.front())) break;  // wait for a bounce slot to come back
            const unsigned id = free_ids_.back();
            free_ids_.pop_back();
            slots_[id] = ready_.front();
            ready_.pop_front();
            prep(id);
        }
        if (in_flight_ == 0) return;
        int r = io_uring_submit_and_wait(ring, 1);
        if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
            job_.fail(std::make_exception_ptr(error(std::error_code(-r, std::system_category()),
                                                    *job_.target->path + ": io_uring_enter")));
            drain();
            return;
        }
        if (r > 0) unsubmitted_ -= std::min<unsigned>(unsubmitted_, static_cast<unsigned>(r));
        io_uring_cqe* cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(ring, head, cqe) {
            ++seen;
            const auto id = static_cast<unsigned>(io_uring_cqe_get_data64(cqe));
            const int res = cqe->res;
            --in_flight_;
            free_ids_.push_back(id);
            try {
                handle(id, res);
            } catch (...) {
                job_.fail(std::current_exception());
            }
        }
        io_uring_cq_advance(ring, seen);
    }
}

bool read_worker::claim() {
    const std::size_t i = job_.queue.claim(index_);
    if (i == chunk_queue::none) return false;
    const read_chunk& c = job_.chunks[i];
    if (!job_.target->direct) {
        request r;
        r.chunk = i;
        r.start = r.pos = c.offset;
        r.end = r.need_end = c.offset + c.length;
        r.base = c.dst;
        job_.parts[i] = 1;
        ready_.push_back(r);
    } else {
        expand_direct(i, c);
    }
    return true;
}

// O_DIRECT: an unaligned head and tail each go through one aligned edge
// block; the aligned middle goes straight into dst when dst is aligned
// there, else through big bounce slots.
void read_worker::expand_direct(std::size_t index, const read_chunk& c) {
    const std::uint64_t a = job_.target->align;
    const std::uint64_t end = c.offset + c.length;
    std::uint32_t parts = 0;
    auto bounce = [&](kind how, std::uint64_t from, std::uint64_t len, std::uint64_t copy_from,
                      std::uint64_t copy_len) {
        request r;
        r.chunk = index;
        r.start = r.pos = from;
        r.end = from + len;
        r.need_end = copy_from + copy_len;
        r.how = how;
        r.copy_dst = c.dst + (copy_from - c.offset);
        r.copy_from = copy_from;
        r.copy_len = copy_len;
        ready_.push_back(r);
        ++parts;
    };
    std::uint64_t pos = c.offset;
    const direct_split split = split_direct(pos, end, a);
    if (split.head_end > pos) {
        bounce(kind::edge_bounce, format::align_down(pos, a), a, pos, split.head_end - pos);
        pos = split.head_end;
    }
    const std::uint64_t mid_end = split.mid_end;
    if (pos < mid_end) {
        std::byte* d = c.dst + (pos - c.offset);
        if (reinterpret_cast<std::uintptr_t>(d) % job_.target->mem_align == 0) {
            request r;
            r.chunk = index;
            r.start = r.pos = pos;
            r.end = r.need_end = mid_end;
            r.base = d;
            ready_.push_back(r);
            ++parts;
        } else {
            for (std::uint64_t p = pos; p < mid_end; p += ring_.big_size()) {
                const std::uint64_t n = std::min<std::uint64_t>(ring_.big_size(), mid_end - p);
                bounce(kind::big_bounce, p, n, p, n);
            }
        }
        pos = mid_end;
    }
    if (pos < end) bounce(kind::edge_bounce, pos, a, pos, end - pos);
    job_.parts[index] = parts;
}

bool read_worker::acquire_slot(request& r) {
    if (r.how == kind::into_dst || r.slot >= 0) return true;
    auto& pool = r.how == kind::edge_bounce ? free_edge_ : free_big_;
    if (pool.empty()) return false;
    r.slot = static_cast<int>(pool.back());
    pool.pop_back();
    r.base = r.how == kind::edge_bounce ? ring_.edge_slot(static_cast<unsigned>(r.slot))
                                        : ring_.big_slot(static_cast<unsigned>(r.slot));
    return true;
}

void read_worker::release_slot(request& r) {
    if (r.slot < 0) return;
    (r.how == kind::edge_bounce ? free_edge_ : free_big_).push_back(static_cast<unsigned>(r.slot));
    r.slot = -1;
}

void read_worker::prep(unsigned id) {
    io_uring* ring = ring_.ring();
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    if (!sqe) {  // SQ full of unsubmitted entries: hand them to the kernel first
        io_uring_submit(ring);
        unsubmitted_ = 0;
        sqe = io_uring_get_sqe(ring);
    }
    request& r = slots_[id];
    std::byte* buf = r.base + (r.pos - r.start);
    const auto len = static_cast<unsigned>(r.end - r.pos);
    if (r.how != kind::into_dst && ring_.fixed_buffers())
        io_uring_prep_read_fixed(sqe, ring_.sqe_fd(), buf, len, r.pos, r.how == kind::edge_bounce ? 0 : 1);
    else
        io_uring_prep_read(sqe, ring_.sqe_fd(), buf, len, r.pos);
    if (ring_.fixed_file()) sqe->flags |= IOSQE_FIXED_FILE;
    if (job_.target->async_punt) sqe->flags |= IOSQE_ASYNC;
    io_uring_sqe_set_data64(sqe, id);
    ++in_flight_;
    ++unsubmitted_;
}

void read_worker::handle(unsigned id, int res) {
    request& r = slots_[id];
    const read_target& t = *job_.target;
    completion_event ev{r.pos, r.end - r.pos, job_.ops[job_.chunks[r.chunk].op].tag,
                        r.base + (r.pos - r.start), t.direct, index_, t.async_punt};
    res = apply_completion_fault(ev, res);
    const bool stopping = job_.stop.load(std::memory_order_relaxed);
    if (res == -ECANCELED && r.retries > 0 && !stopping) {
        // Cancelled again by io-wq, which could not start a worker thread (a thread limit,
        // RLIMIT_NPROC): every resubmission would get the same answer after its backoff. The
        // read is done here, on this worker's own thread (the threads the load has suffice).
        res = read_here(ring_.fd(), r.base + (r.pos - r.start), static_cast<std::uint32_t>(r.end - r.pos), r.pos);
    }
    if (transient_result(res)) {
        if (stopping) return release_slot(r);
        if (++r.retries > max_retries) {
            release_slot(r);
            raise_at(std::error_code(-res, std::system_category()), r, r.pos,
                     "read kept failing after " + std::to_string(max_retries) + " retries");
        }
        ready_.push_front(r);
        return;
    }
    if (res < 0) {
        release_slot(r);
        raise_at(std::error_code(-res, std::system_category()), r, r.pos, "read failed");
    }
    const std::uint64_t old = r.pos;
    std::uint64_t pos = old + static_cast<std::uint64_t>(res);
    if (res > 0 && pos >= r.need_end) return complete(r);
    // A direct read must restart aligned; an unaligned count means EOF inside a block.
    if (t.direct) pos = format::align_down(pos, std::uint64_t{t.align});
    if (pos <= old) {
        release_slot(r);
        raise_at(make_error_code(errc::Truncated), r, pos,
                 "the file ended early (it shrank after open: size was " + std::to_string(t.size) + " bytes)");
    }
    r.pos = pos;
    r.retries = 0;
    if (stopping) return release_slot(r);
    ready_.push_front(r);  // resubmit the remainder next
}

void read_worker::complete(request& r) {
    if (r.how != kind::into_dst) std::memcpy(r.copy_dst, r.base + (r.copy_from - r.start), r.copy_len);
    release_slot(r);
    if (--job_.parts[r.chunk] == 0 && job_.ctl->on_bytes) {
        const read_chunk& c = job_.chunks[r.chunk];
        job_.ctl->on_bytes(c.op, c.length);
    }
}

void read_worker::drain() noexcept {
    io_uring* ring = ring_.ring();
    if (unsubmitted_) {
        const int s = io_uring_submit(ring);
        if (s > 0) unsubmitted_ -= std::min<unsigned>(unsubmitted_, static_cast<unsigned>(s));
    }
    // Entries the kernel never took cannot complete; wait only for the rest.
    in_flight_ -= unsubmitted_;
    unsubmitted_ = 0;
    // A broken ring ends the wait: nothing more can be waited for.
    drain_completions(*ring, in_flight_, [](io_uring_cqe*) { return true; });
}

void read_worker::raise_at(std::error_code ec, const request& r, std::uint64_t at, const std::string& what) {
    const read_chunk& c = job_.chunks[r.chunk];
    const read_op& op = job_.ops[c.op];
    throw error(ec, *job_.target->path + ": " + what + " at file offset " + std::to_string(at) + " while reading " +
                        job_.describe(c.op) + " (bytes " + std::to_string(op.offset) + ".." +
                        std::to_string(op.offset + op.length) + ")");
}

}  // namespace ringsafe::uring
