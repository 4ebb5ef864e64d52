// Sources whose reads can run as asynchronous operations on a caller's
// executor (engine-internal; the public source interface stays free of
// Asio). The async engine (engine/asio) uses it instead of running the
// blocking execute() on a thread; the HTTP source implements it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <system_error>

#include <boost/asio/any_io_executor.hpp>

#include "ringsafe/source.hpp"

namespace ringsafe::detail {

// What a run reports. Every callback runs on the run's executor.
struct async_callbacks {
    // Bytes of ops[op_index] landed in its destination (several calls per op).
    std::function<void(std::size_t op_index, std::uint64_t bytes)> on_bytes;
    // Names what an op is for in messages ("tensor 'w' (bytes 0..64)").
    std::function<std::string(std::uint32_t tag)> describe;
    // Called exactly once, when no I/O of the run targets caller memory any
    // more: the first error and its message (named as execute() names it:
    // source, range, tensor), or none; `cancelled` when cancel() ended it
    // (then the error, if any, is a consequence and may be ignored).
    std::function<void(std::error_code ec, std::string message, bool cancelled)> on_done;
};

// One run in flight.
class async_run {
public:
    virtual ~async_run() = default;
    // Stops the run now: in-flight requests are abandoned (their connections
    // closed, never reused), waits cancelled; on_done follows with cancelled
    // set. Call it on the run's executor; it does nothing after on_done.
    virtual void cancel() = 0;
};

class async_source {
public:
    virtual ~async_source() = default;
    // Starts reading `ops` (which, like their destinations, must stay valid
    // until on_done) as asynchronous operations on `ex`, which must run its
    // handlers one at a time (a strand, or an io_context run by one thread).
    // Never calls a callback before returning; errors found before any I/O
    // (a range beyond the end) arrive through on_done too. The source must
    // outlive the run, and be destroyed before the executor's execution context.
    virtual std::shared_ptr<async_run> start_async(boost::asio::any_io_executor ex, std::span<const read_op> ops,
                                                   async_callbacks cb) = 0;
};

}  // namespace ringsafe::detail
