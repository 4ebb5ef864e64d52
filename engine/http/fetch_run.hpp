// One asynchronous run of a remote source's read_ops on a caller's executor
// (engine-internal): coroutine workers fetch the pieces over connections of a
// pool bound to that executor, report bytes as they land, and tell the caller
// once no request targets its memory any more.
#pragma once

#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <random>
#include <span>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "source/abandon_list.hpp"
#include "source/async_source.hpp"
#include "http/fetch_pieces.hpp"
#include "http/range_fetch.hpp"

namespace ringsafe::http {

class fetch_run final : public detail::async_run, public std::enable_shared_from_this<fetch_run> {
public:
    // `object` is this run's copy of what is known about the object; `pool`
    // must be bound to the executor start() is given, and outlive the run.
    fetch_run(remote_object object, connection_pool& pool, const http_options& opts, std::uint32_t seed,
              std::span<const read_op> ops, detail::async_callbacks cb);

    // Spawns the workers on `ex` (on_done is posted there when the ops are
    // invalid or empty). `name` is the source's URL, `size` its size.
    void start(net::any_io_executor ex, std::uint64_t size, const std::string& name);
    void cancel() override;

private:
    net::awaitable<void> worker();
    void worker_ended(std::exception_ptr e);
    void fail(std::error_code ec, std::string message);

    remote_object object_;
    connection_pool& pool_;
    const http_options& opts_;
    std::minstd_rand rng_;
    std::span<const read_op> ops_;
    detail::async_callbacks cb_;
    std::deque<piece> work_;
    detail::abandon_list abandon_;  // abandoned on cancel() and on the first error
    unsigned workers_ = 0;  // spawned and not yet ended
    bool cancelled_ = false;
    bool done_ = false;
    std::error_code ec_;
    std::string message_;
};

}  // namespace ringsafe::http
