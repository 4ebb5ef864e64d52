// Read plans: which byte ranges of which shard land where in caller memory.
// A plan is computed once by a reader (sizes validated, ranges coalesced and
// split into chunks) and can be executed many times into the same buffers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ringsafe {

struct tensor_info;

// A half-open range [start, stop) of indices along one dimension.
struct dim_range {
    std::uint64_t start = 0;
    std::uint64_t stop = 0;
};

// What to read into one caller buffer: a whole tensor, or an N-d box of it.
struct read_request {
    std::string tensor;           // exact tensor name
    // Per-dimension ranges, outermost first. Fewer ranges than the tensor's rank
    // leave the remaining dimensions whole, so {} is the whole tensor and
    // {{b, e}} is rows [b, e) of dimension 0.
    std::vector<dim_range> box;
    // Caller memory receiving the box packed in row-major order. Must hold at
    // least reader::box_bytes() bytes (BufferTooSmall otherwise, before any I/O)
    // and stay valid and untouched by others while the plan executes.
    std::span<std::byte> dst;
    // Instead of a box (which must then be empty): bytes [start, stop) of the
    // tensor's data, e.g. to stream a large tensor through a small buffer.
    // InvalidArgument when the window reaches past the tensor.
    std::optional<dim_range> bytes = std::nullopt;
};

// Where a tensor was packed into a caller arena (reader::plan_packed).
struct placement {
    std::uint32_t tensor = 0;  // index into reader::tensors()
    std::uint64_t offset = 0;  // from the arena's first byte; a multiple of the alignment asked for
    std::uint64_t size = 0;    // bytes
};

// How the planner shapes I/O. Defaults: chunk from the source's hints, coalescing on.
struct plan_options {
    std::uint64_t chunk_size = 0;  // split ranges into ops of at most this size; 0 = source's preferred chunk
    bool coalesce = true;          // merge ranges adjacent both in the source and in memory
};

// Progress reporting and cancellation for one execution. Callbacks may run on
// I/O worker threads, several at once: they must be thread-safe and cheap.
struct read_control {
    // Bytes landed so far across the whole plan and the plan's total. Calls
    // from different threads may arrive slightly out of order.
    std::function<void(std::uint64_t done, std::uint64_t total)> on_progress;
    // Called once per request (target) when all of its bytes have landed;
    // `target` is the request's position (selection order for tensor reads),
    // `tensor` the tensor it reads. Zero-byte targets complete before any I/O.
    std::function<void(std::size_t target, const tensor_info& tensor)> on_tensor_done;
    // Set it to true (from any thread) to stop: in-flight I/O is drained and
    // execute() throws errc::Cancelled. Checked before any I/O starts too.
    const std::atomic<bool>* cancel = nullptr;
};

namespace detail {
struct plan_data;  // engine/plan/plan_data.hpp
}

// A validated, coalesced and chunked set of reads into caller buffers. Cheap to
// copy (shared, immutable). Valid only with the reader that made it, and only
// while the caller's destination buffers stay alive: executing it writes into
// them again. reader::execute() refuses a plan from another reader
// (InvalidArgument); a default-constructed plan is empty and reads nothing.
class read_plan {
public:
    read_plan() = default;
    explicit read_plan(std::shared_ptr<const detail::plan_data> d) : d_(std::move(d)) {}

    std::uint64_t total_bytes() const noexcept;  // bytes the plan moves
    std::size_t op_count() const noexcept;       // I/O operations after coalescing and splitting
    std::size_t target_count() const noexcept;   // requests (tensors or boxes) it fills
    // Arena plans only: where each selected tensor was packed, in selection order.
    std::span<const placement> placements() const noexcept;

    const detail::plan_data* data() const noexcept { return d_.get(); }  // for the engine

private:
    std::shared_ptr<const detail::plan_data> d_;
};

}  // namespace ringsafe
