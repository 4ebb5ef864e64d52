// The event loops of a remote source's blocking reads (engine-internal): one
// per thread asked for (http_options::threads), each with its own io_context
// and connection pool holding its share of the connections. A read runs loop
// 0 on the calling thread and, when its requests need more connections than
// loop 0's share, the next loops on threads it starts and joins before
// returning; all of them pull pieces from one shared queue and parse bodies
// straight into the caller's buffers.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

#include "http/connection.hpp"
#include "http/fetch_pieces.hpp"
#include "http/range_fetch.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe::http {

class event_loops {
public:
    // `opts` resolved (resolved_http_options); it must outlive this object.
    // Only loop 0 is made here; the others on the first read that uses them.
    explicit event_loops(const http_options& opts);
    ~event_loops();

    // Loop 0's pool (where the open's request runs; its connection is reused).
    connection_pool& first_pool() { return *loops_.front()->pool; }
    // Runs `fn` to completion on loop 0, on the calling thread; rethrows its failure.
    void run_first(const std::function<net::awaitable<void>()>& fn);

    // Fetches `work` (pieces of `ops`) into the caller's buffers over
    // min(threads, workers) loops. `object` is this read's copy of what is
    // known about the object (a redirect learned by any loop is written back).
    // The first failure abandons every loop's requests, and is rethrown here,
    // named by op_label, once no thread runs and no request targets caller
    // memory; ctl.cancel is seen by every loop (Cancelled). No thread started
    // here outlives the call.
    void fetch(std::deque<piece> work, remote_object& object, std::span<const read_op> ops, const io_control& ctl);

    // In a fork() child: rebuilds each loop's descriptors and drops the
    // child's copies of the parent's connections (no thread outlives a read,
    // so none is lost to the fork).
    void drop_inherited_connections();

private:
    struct loop {
        net::io_context io{1};
        std::unique_ptr<connection_pool> pool;
        http_options opts;  // connections_per_origin: this loop's share
        std::minstd_rand rng;
    };
    struct run;
    // This loop's share of `connections` split over `threads` loops.
    static unsigned share(unsigned connections, unsigned threads, std::size_t index);
    // Workers per loop for a read that runs `workers` requests at once: the
    // fewest loops whose shares hold them, the workers spread evenly over those
    // within each loop's share. Empty when workers is 0.
    static std::vector<unsigned> spread(unsigned workers, unsigned connections, unsigned threads);
    void make_pool(loop& l) const;

    const http_options& opts_;
    std::vector<std::unique_ptr<loop>> loops_;
};

}  // namespace ringsafe::http
