// The steps of async_open as coroutines on one strand (engine-internal):
// local files opened, sized and read by io_uring operations on the ring that
// the resulting async_reader keeps, remote objects by their first request
// over the executor's connection pool, and the header (or index) read after
// the prefix. Each step throws what the blocking reader::open throws for the
// same failure, or open_aborted once the open was cancelled.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include <boost/asio/awaitable.hpp>

#include "asio/ring_driver.hpp"
#include "read/load_header.hpp"
#include "source/abandon_list.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe::asio::detail {

// Thrown by a step that finds the open cancelled.
struct open_aborted {};

// What every step of one async_open shares. Touched on `strand` only.
struct open_context {
    engine_strand strand;
    std::shared_ptr<uring::event_ring> ring;
    reader_options ropts;
    // Cancellation: abandoning it cancels the ring operations and drops the
    // HTTP requests in flight; steps then throw open_aborted.
    ringsafe::detail::abandon_list abandon;

    void check_cancelled() const {
        if (abandon.abandoned()) throw open_aborted{};
    }
};

// Submits one single operation of the ring (uring::event_ring::submit_openat,
// submit_read) with the given completion; returns its id.
using single_submit = std::function<std::uint64_t(uring::event_ring&, std::function<void(int)> done)>;
// One single operation on c's ring, submitted by `submit`; its result.
// Transient results (uring::transient_result) are resubmitted.
boost::asio::awaitable<int> ring_op(open_context& c, single_submit submit);
// Opens `spec` (a path or URL) as open_source() does, without blocking.
boost::asio::awaitable<std::unique_ptr<source>> open_one(open_context& c, const std::string& spec);
// src.read_exact(offset, dst) without blocking (file sources on the ring,
// remote ones as an async run; `one_request`: as one request, read_op's
// flag); the same errors.
boost::asio::awaitable<void> read_exact_async(open_context& c, source& src, std::uint64_t offset,
                                              std::span<std::byte> dst, bool one_request = false);
// read::load_header without blocking.
boost::asio::awaitable<ringsafe::read::shard_header> load_header_async(open_context& c, source& src);

}  // namespace ringsafe::asio::detail
