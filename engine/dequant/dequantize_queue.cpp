// dequantize_queue: jobs cut into pieces on one list; up to `threads` pool
// threads take pieces until the list is empty, and a waiting caller helps.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>

#include "dequant/conversion.hpp"
#include "ringsafe/dequantize.hpp"
#include "uring/worker_threads.hpp"

namespace ringsafe {
namespace dequant {
namespace {

// A submitted job: its checked conversion, and the pieces not yet finished.
struct queued_job {
    dequantize_job job;
    conversion c;
    std::atomic<std::size_t> pieces_left{0};
};

struct piece {
    std::shared_ptr<queued_job> job;
    std::uint64_t first = 0, count = 0;  // blocks
};

}  // namespace
}  // namespace dequant

struct dequantize_queue::state {
    unsigned max_workers = 1;
    std::mutex m;
    std::condition_variable idle;       // notified when nothing is queued or running
    std::deque<dequant::piece> queued;  // guarded by m
    std::size_t running = 0;            // pieces being run; guarded by m
    unsigned workers = 0;               // worker tasks started and not yet out of work; guarded by m
    std::exception_ptr error;           // the first exception of an on_done; guarded by m
    std::mutex start_m;                 // thread_group::start() is called by one thread at a time
    uring::thread_group group;          // last: destroyed first, waiting for the worker tasks

    bool quiet() const noexcept { return queued.empty() && running == 0; }

    // Takes the next piece, or false when there is none. Holds `lock`.
    bool take(dequant::piece& p) noexcept {
        if (queued.empty()) return false;
        p = std::move(queued.front());
        queued.pop_front();
        ++running;
        return true;
    }

    // Runs a piece take() gave (`lock` held on entry and exit, released
    // meanwhile); the job's last piece calls its on_done. The piece's hold on
    // the job ends before the piece counts as done.
    void run(std::unique_lock<std::mutex>& lock, dequant::piece p) noexcept {
        lock.unlock();
        dequant::run_blocks(p.job->c, p.job->job.blocks.data(), p.job->job.dst.data(), p.first, p.count);
        std::exception_ptr e;
        if (p.job->pieces_left.fetch_sub(1, std::memory_order_acq_rel) == 1 && p.job->job.on_done) {
            try {
                p.job->job.on_done();
            } catch (...) {
                e = std::current_exception();
            }
        }
        p = {};
        lock.lock();
        if (e && !error) error = e;
        if (--running == 0 && queued.empty()) idle.notify_all();
    }

    // A worker task: pieces until none is left.
    void work() noexcept {
        std::unique_lock lock(m);
        for (dequant::piece p; take(p);) run(lock, std::move(p));
        --workers;
    }

    // Runs pieces until none is left or `deadline` (none: no limit), then waits
    // for the running ones until then. True when quiet; rethrows an on_done's
    // exception once.
    bool help_until(std::optional<std::chrono::steady_clock::time_point> deadline) {
        std::unique_lock lock(m);
        const auto before = [&] { return !deadline || std::chrono::steady_clock::now() < *deadline; };
        for (dequant::piece p; before() && take(p);) run(lock, std::move(p));
        if (!deadline) {
            idle.wait(lock, [this] { return quiet(); });
        } else if (!idle.wait_until(lock, *deadline, [this] { return quiet(); })) {
            return false;
        }
        if (error) std::rethrow_exception(std::exchange(error, nullptr));
        return true;
    }
};

dequantize_queue::dequantize_queue(unsigned threads) : s_(std::make_unique<state>()) {
    s_->max_workers = dequant::thread_count(threads);
}

dequantize_queue::~dequantize_queue() {
    cancel();
    std::unique_lock lock(s_->m);
    s_->idle.wait(lock, [this] { return s_->quiet(); });
}

bool dequantize_queue::submit(dequantize_job job, status& st) noexcept {
    st.clear();
    try {
        auto q = std::make_shared<dequant::queued_job>();
        if (!dequant::check_conversion(job.type, job.blocks.size(), job.out, job.dst.size(), job.name, q->c, st))
            return false;
        q->job = std::move(job);
        const std::uint64_t per_piece = dequant::piece_blocks(q->c, s_->max_workers);
        unsigned to_start = 0;
        {
            std::lock_guard lock(s_->m);
            // An empty tensor is one piece of no blocks, so that its on_done is called as any other's.
            const std::uint64_t pieces = std::max<std::uint64_t>(1, (q->c.blocks + per_piece - 1) / per_piece);
            q->pieces_left.store(pieces, std::memory_order_relaxed);
            const std::size_t before = s_->queued.size();
            try {
                for (std::uint64_t i = 0; i < pieces; ++i) {
                    const std::uint64_t first = i * per_piece;
                    s_->queued.push_back({q, first, std::min(per_piece, q->c.blocks - first)});
                }
            } catch (...) {  // none of the job may run when its submit fails
                s_->queued.resize(before);
                throw;
            }
            while (s_->workers < s_->max_workers && to_start < s_->queued.size()) ++s_->workers, ++to_start;
        }
        std::lock_guard start_lock(s_->start_m);
        for (; to_start > 0; --to_start) {
            if (s_->group.start([s = s_.get()] { s->work(); })) continue;
            // No thread to be had: the pieces wait for wait()'s caller.
            std::lock_guard lock(s_->m);
            s_->workers -= to_start;
            break;
        }
        return true;
    } catch (const std::bad_alloc&) {
        st.code = make_error_code(errc::InvalidArgument);
        st.message = "dequantize_queue: out of memory queueing a tensor";
        return false;
    }
}

void dequantize_queue::submit(dequantize_job job) {
    status st;
    if (!submit(std::move(job), st)) raise(st.code, st.message);
}

void dequantize_queue::wait() { s_->help_until(std::nullopt); }

bool dequantize_queue::wait_for(std::chrono::milliseconds timeout) {
    return s_->help_until(std::chrono::steady_clock::now() + timeout);
}

void dequantize_queue::cancel() noexcept {
    std::deque<dequant::piece> dropped;  // destroyed (and with them the jobs and their on_done) after the unlock
    std::lock_guard lock(s_->m);
    dropped.swap(s_->queued);
    if (s_->running == 0) s_->idle.notify_all();
}

}  // namespace ringsafe
