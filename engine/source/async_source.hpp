// Sources whose reads can run as asynchronous operations on a caller's
// executor (engine-internal; the public source interface stays free of
// Asio). The async front end (engine/asio) uses it instead of running the
// blocking execute() on a thread; the file source implements it over the
// event ring (engine/uring), the HTTP source over its connection pools.
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

// The completion ring an executor drives for the sources that read on it:
// engine/uring's event ring derives from it, and only file sources, which
// know it as that, look inside. The seam names no source kind.
class async_ring {
public:
    virtual ~async_ring() = default;

protected:
    async_ring() = default;
};

// Where a run executes: the executor its callbacks run on, which must run
// handlers one at a time (a strand, or an io_context run by one thread), and
// the event ring driven on that executor (file sources read on it).
struct async_context {
    boost::asio::any_io_executor ex;
    std::shared_ptr<async_ring> ring;
};

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
    // Bytes that landed after the run stopped (cancelled or failed): counted,
    // never reported as progress. Optional; sources that drop such bytes never call it.
    std::function<void(std::uint64_t bytes)> on_stopped_bytes;
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
    // Whether start_async can run here (else the caller runs the blocking
    // execute() on a thread; e.g. O_DIRECT alignments the ring cannot bounce).
    virtual bool can_start_async() const noexcept { return true; }
    // Starts reading `ops` (which, like their destinations, must stay valid
    // until on_done) as asynchronous operations in `ctx`. Never calls a
    // callback before returning; errors found before any I/O (a range beyond
    // the end) arrive through on_done too. The source must outlive the run,
    // and be destroyed before the executor's execution context.
    virtual std::shared_ptr<async_run> start_async(const async_context& ctx, std::span<const read_op> ops,
                                                   async_callbacks cb) = 0;
};

}  // namespace ringsafe::detail
