#include "http/event_loops.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

#include "ringsafe/error.hpp"
#include "source/abandon_list.hpp"

namespace ringsafe::http {

// One read over several loops: the shared queue and the first failure, and
// per loop its copy of the object and its abandon list (each used on its
// loop's thread only; other threads reach it by posting to the loop).
struct event_loops::run {
    struct on_loop {
        loop* l;
        remote_object object;
        detail::abandon_list abandon;
    };
    run(std::span<const read_op> o, const io_control& c, std::deque<piece> w) : ops(o), ctl(c), work(std::move(w)) {}

    std::span<const read_op> ops;
    const io_control& ctl;
    std::mutex m;  // work, first_error
    std::deque<piece> work;
    std::exception_ptr first_error;
    std::atomic<bool> failed{false};
    std::vector<std::unique_ptr<on_loop>> loops;

    bool stop() const {
        return failed.load(std::memory_order_relaxed) || (ctl.cancel && ctl.cancel->load(std::memory_order_relaxed));
    }
    std::optional<piece> next() {
        std::lock_guard lock(m);
        if (work.empty()) return std::nullopt;
        piece p = work.front();
        work.pop_front();
        return p;
    }
    // Keeps the first failure and abandons every loop's requests at once
    // (each on its own thread); later failures are its consequences.
    void fail(std::exception_ptr e) {
        {
            std::lock_guard lock(m);
            if (first_error) return;
            first_error = std::move(e);
        }
        failed.store(true, std::memory_order_relaxed);
        for (auto& ol : loops) net::post(ol->l->io, [ol = ol.get()] { ol->abandon.abandon(); });
    }

    net::awaitable<void> worker(on_loop& ol) {
        auto stopped = [this] { return stop(); };
        while (!stop()) {
            const std::optional<piece> p = next();
            if (!p) break;
            std::function<void(std::uint64_t)> progress;
            if (ctl.on_bytes) progress = [this, i = p->op_index](std::uint64_t n) { ctl.on_bytes(i, n); };
            try {
                co_await fetch_range(fetch_context{ol.object, *ol.l->pool, ol.l->opts, ol.l->rng, &ol.abandon},
                                     p->offset, p->length, p->dst, progress, stopped);
            } catch (const error& e) {
                throw error(e.code(), op_label(ctl.describe, ops[p->op_index]) + e.what());
            }
        }
    }
};

event_loops::event_loops(const http_options& opts) : opts_(opts) {
    loops_.push_back(std::make_unique<loop>());
    make_pool(*loops_.front());
}

event_loops::~event_loops() = default;

unsigned event_loops::share(unsigned connections, unsigned threads, std::size_t index) {
    return connections / threads + (index < connections % threads ? 1 : 0);
}

std::vector<unsigned> event_loops::spread(unsigned workers, unsigned connections, unsigned threads) {
    // As few loops as hold the workers within their shares: a small read on a
    // second loop pays a thread and a wake-up of the other core for nothing
    // its first loop's connections could not carry (1 MiB reads ran at 0.67
    // of one loop's speed with two on the 2-core VM). The workers spread evenly
    // over those loops, which keeps each within its share (the shares of the
    // first loops are the larger ones and differ by at most one).
    threads = std::max(1u, std::min(threads, connections));
    workers = std::min(workers, connections);
    unsigned loops = 0;
    for (unsigned held = 0; held < workers; ++loops) held += share(connections, threads, loops);
    std::vector<unsigned> out(loops);
    for (unsigned i = 0; i < loops; ++i) out[i] = share(workers, loops, i);
    return out;
}

void event_loops::make_pool(loop& l) const {
    l.opts = opts_;
    l.rng.seed(std::random_device{}());
    l.pool = std::make_unique<connection_pool>(l.io.get_executor(), tls_settings{opts_.verify_peer, opts_.ca_file},
                                               opts_.connect_timeout);
}

void event_loops::run_first(const std::function<net::awaitable<void>()>& fn) {
    loop& l = *loops_.front();
    std::exception_ptr err;
    net::co_spawn(l.io, fn(), [&](std::exception_ptr e) { err = e; });
    l.io.restart();
    l.io.run();
    if (err) std::rethrow_exception(err);
}

void event_loops::fetch(std::deque<piece> work, remote_object& object, std::span<const read_op> ops,
                        const io_control& ctl) {
    const unsigned threads = std::max(1u, std::min(opts_.threads, opts_.connections_per_origin));
    const std::size_t workers = std::min<std::size_t>(opts_.connections_per_origin, work.size());
    // Each loop runs at most its share of the connections, so that its pool
    // never keeps more than that: keep-alive connections are reused by later
    // reads, and the loops together never hold more than connections_per_origin.
    const std::vector<unsigned> per_loop = spread(static_cast<unsigned>(workers), opts_.connections_per_origin, threads);
    const std::size_t used = per_loop.size();
    if (used == 0) return;
    while (loops_.size() < used) {
        loops_.push_back(std::make_unique<loop>());
        make_pool(*loops_.back());
    }
    run r(ops, ctl, std::move(work));
    std::vector<std::thread> started;
    std::vector<loop*> unthreaded;  // loops whose thread could not be started run here, after loop 0
    started.reserve(used);
    unthreaded.reserve(used);
    for (std::size_t i = 0; i < used; ++i) {
        loops_[i]->opts.connections_per_origin = share(opts_.connections_per_origin, threads, i);  // its idle keep
        r.loops.push_back(std::make_unique<run::on_loop>(run::on_loop{loops_[i].get(), object, {}}));
    }
    for (std::size_t i = 0; i < used; ++i) {
        run::on_loop& ol = *r.loops[i];
        ol.l->io.restart();
        for (unsigned w = 0; w < per_loop[i]; ++w)
            net::co_spawn(ol.l->io, r.worker(ol), [&r](std::exception_ptr e) {
                if (e) r.fail(e);
            });
    }
    // Until the loop's workers have ended (a handler that throws, out of
    // memory, fails the read; the loop goes on so that its requests end).
    auto drive = [&r](loop& l) {
        for (;;) {
            try {
                l.io.run();
                return;
            } catch (...) {
                r.fail(std::current_exception());
            }
        }
    };
    for (std::size_t i = 1; i < used; ++i) {
        try {
            started.emplace_back(drive, std::ref(*r.loops[i]->l));
        } catch (...) {  // no thread (EAGAIN): this loop runs on the calling thread
            unthreaded.push_back(r.loops[i]->l);
        }
    }
    drive(*r.loops[0]->l);
    for (loop* l : unthreaded) drive(*l);
    for (auto& t : started) t.join();
    // Abandon actions posted after a loop ran out of work (they touch this
    // read's state): run them now, so that none reaches a later read.
    for (std::size_t i = 0; i < used; ++i) {
        loop& l = *r.loops[i]->l;
        l.io.restart();
        l.io.poll();
    }
    for (auto& ol : r.loops)
        if (ol->object.location.str() != object.location.str()) {
            object.location = ol->object.location;  // a redirect learned here serves later reads
            break;
        }
    if (r.first_error) std::rethrow_exception(r.first_error);
}

void event_loops::drop_inherited_connections() {
    for (auto& l : loops_) {
        l->io.notify_fork(net::execution_context::fork_child);
        make_pool(*l);
    }
}

}  // namespace ringsafe::http
