// Running a read plan: every shard's ops on its source, shards concurrently,
// with progress, per-target completion, cancellation and first-error reporting.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "plan/plan_data.hpp"
#include "format/error_context.hpp"
#include "read/op_description.hpp"
#include "read/reader_impl.hpp"
#include "read/thread_start.hpp"

namespace ringsafe {
namespace {

using detail::plan_data;
using detail::shard_ops;

// Counters shared by the shards of one execution.
struct run_state {
    const reader::impl& r;
    const plan_data& d;
    const read_control& ctl;
    std::unique_ptr<std::atomic<std::uint64_t>[]> target_left;
    std::unique_ptr<std::atomic<std::uint64_t>[]> op_left;
    std::vector<std::size_t> op_base;  // per shard entry: first index into op_left
    std::atomic<std::uint64_t> done{0};
    std::atomic<bool> abort{false};

    run_state(const reader::impl& r_, const plan_data& d_, const read_control& c)
        : r(r_), d(d_), ctl(c),
          target_left(new std::atomic<std::uint64_t>[d_.targets.size()]),
          op_left(new std::atomic<std::uint64_t>[d_.op_count]) {
        std::size_t base = 0;
        for (auto& so : d.shards) {
            op_base.push_back(base);
            for (std::size_t i = 0; i < so.ops.size(); ++i) op_left[base + i] = so.ops[i].length;
            base += so.ops.size();
        }
        for (std::size_t t = 0; t < d.targets.size(); ++t) target_left[t] = d.targets[t].bytes;
    }

    void complete_target(std::uint32_t t) {
        if (ctl.on_tensor_done) ctl.on_tensor_done(t, r.tensors[d.targets[t].tensor]);
    }

    void landed(std::size_t shard_entry, std::size_t op, std::uint64_t n) {
        if (ctl.cancel && ctl.cancel->load(std::memory_order_relaxed))
            abort.store(true, std::memory_order_relaxed);
        const std::uint64_t now = done.fetch_add(n, std::memory_order_relaxed) + n;
        if (ctl.on_progress) ctl.on_progress(now, d.total_bytes);
        const shard_ops& so = d.shards[shard_entry];
        if (op >= so.ops.size()) return;
        if (op_left[op_base[shard_entry] + op].fetch_sub(n, std::memory_order_acq_rel) != n) return;
        for (auto s = so.seg_begin[op]; s < so.seg_begin[op + 1]; ++s) {
            const auto& seg = d.segments[s];
            if (target_left[seg.target].fetch_sub(seg.bytes, std::memory_order_acq_rel) == seg.bytes)
                complete_target(seg.target);
        }
    }

    std::string describe(std::size_t shard_entry, std::uint32_t op) const {
        return read::describe_op(d, r.tensors, shard_entry, op);
    }

    void run_shard(std::size_t entry, const std::atomic<bool>* cancel) {
        const shard_ops& so = d.shards[entry];
        auto& io = *r.io[so.shard];
        io_control c;
        c.cancel = cancel;
        c.on_bytes = [this, entry](std::size_t op, std::uint64_t n) { landed(entry, op, n); };
        c.describe = [this, entry](std::uint32_t tag) { return describe(entry, tag); };
        std::lock_guard lock(io.busy);
        io.src->execute(so.ops, c);
    }
};

bool is_cancelled(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::system_error& x) {
        return x.code() == make_error_code(errc::Cancelled);
    } catch (...) {
        return false;
    }
}

}  // namespace

namespace read {

void execute_plan(reader::impl& r, const read_plan& plan, const read_control& ctl) {
    const plan_data* d = plan.data();
    if (!d) return;
    if (d->reader_id != r.id)
        raise(errc::InvalidArgument, "the plan was made by another reader than the one for " + r.spec);
    if (ctl.cancel && ctl.cancel->load())
        raise(errc::Cancelled, "reading " + r.spec + " was cancelled before it started");
    run_state st(r, *d, ctl);
    for (std::uint32_t t = 0; t < d->targets.size(); ++t)
        if (d->targets[t].bytes == 0) st.complete_target(t);

    const std::size_t n = d->shards.size();
    std::vector<std::exception_ptr> errs(n);
    bool skipped = false;
    if (n == 1) {
        // One shard: the caller's flag goes straight to the executor.
        try {
            st.run_shard(0, ctl.cancel);
        } catch (...) {
            errs[0] = std::current_exception();
        }
    } else if (n > 1) {
        // Several shards: one flag stops them all, raised by the first error
        // or, through a small watcher, by the caller's flag.
        std::mutex m;
        std::condition_variable cv;
        bool finished = false;
        std::thread watcher;
        const std::atomic<bool>* stop = &st.abort;
        std::size_t workers = std::min<std::size_t>(n, r.opts.parallel_shards);
        if (ctl.cancel) {
            watcher = read::try_start_thread([&] {
                std::unique_lock lk(m);
                while (!finished && !st.abort.load()) {
                    if (ctl.cancel->load()) st.abort.store(true);
                    cv.wait_for(lk, std::chrono::milliseconds(2));
                }
            });
            // No thread for the watcher: the shards one after another on this
            // thread, each stopped by the caller's flag itself (a failed shard
            // still skips the rest).
            if (!watcher.joinable()) {
                stop = ctl.cancel;
                workers = 1;
            }
        }
        std::atomic<std::size_t> next{0};
        std::mutex skip_m;
        auto worker = [&] {
            for (std::size_t e; (e = next.fetch_add(1)) < n;) {
                if (st.abort.load()) {
                    std::lock_guard lk(skip_m);
                    skipped = true;
                    continue;
                }
                try {
                    st.run_shard(e, stop);
                } catch (...) {
                    errs[e] = std::current_exception();
                    st.abort.store(true);
                }
            }
        };
        // As many helpers as the system gives; this thread works too, so none is enough.
        std::vector<std::thread> pool = read::start_threads(workers - 1, worker);
        worker();
        for (auto& t : pool) t.join();
        {
            std::lock_guard lk(m);
            finished = true;
        }
        cv.notify_all();
        if (watcher.joinable()) watcher.join();
    }
    // The first real error by shard order wins over the cancellations it caused.
    for (auto& e : errs)
        if (e && !is_cancelled(e)) std::rethrow_exception(e);
    for (auto& e : errs)
        if (e) std::rethrow_exception(e);
    if (skipped) raise(errc::Cancelled, "reading " + r.spec + " was cancelled");
    if (st.done.load() != d->total_bytes)
        raise(errc::IoError, "reading " + r.spec + ": the executor reported " +
                                 std::to_string(st.done.load()) + " of " +
                                 std::to_string(d->total_bytes) + " bytes");
}

}  // namespace read

void reader::execute(const read_plan& plan, const read_control& ctl) {
    read::execute_plan(*p_, plan, ctl);
}

bool reader::execute(const read_plan& plan, const read_control& ctl, status& st) noexcept {
    return format::capture_status(st, p_->spec, [&] { execute(plan, ctl); });
}

}  // namespace ringsafe
