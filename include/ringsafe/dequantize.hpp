// Dequantization of GGUF tensors: ggml's block types (Q4_K, Q8_0, IQ4_XS,
// MXFP4, ...) and plain float types to float32, float16 or bfloat16.
//
//   std::vector<float> out(ringsafe::dequantized_elements(ggml_type::Q4_K, blocks.size()).value());
//   ringsafe::dequantize(ggml_type::Q4_K, blocks, dtype::F32, std::as_writable_bytes(std::span(out)));
//
// float32 values are bit-exact with ggml's and gguf-py's dequantizers; float16
// and bfloat16 outputs are those float32 values rounded to nearest even (as
// torch's `.to()` rounds them). Blocks are read as the file stores them
// (little-endian); neither buffer needs any alignment.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ringsafe/dtype.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/ggml_type.hpp"

namespace ringsafe {

// True for the types dequantize() takes: F32, F16, BF16 and every block type
// but Q8_1 (which ggml cannot dequantize either). False for I8..I64, F64, none.
bool can_dequantize(ggml_type t) noexcept;

// Elements that `block_bytes` bytes of `t` hold; nullopt when `t` has no layout
// or `block_bytes` is not a whole number of blocks.
std::optional<std::uint64_t> dequantized_elements(ggml_type t, std::uint64_t block_bytes) noexcept;

// Dequantizes `blocks` (whole blocks of `t`) into `dst` as `out` (F32, F16 or
// BF16), writing exactly dequantized_elements() x the element size bytes of it
// (a larger dst is fine). `threads`: at most that many threads work on it (the
// caller's among them; 0 = one per CPU); tensors under a few hundred KiB run on
// the caller alone. Both buffers must stay untouched until it returns.
// Throws InvalidArgument (a type it cannot dequantize, naming it; `out` not
// F32/F16/BF16; blocks not whole) or BufferTooSmall, before writing anything.
// Thread-safe: calls on different buffers may run at once.
void dequantize(ggml_type t, std::span<const std::byte> blocks, dtype out, std::span<std::byte> dst,
                unsigned threads = 0);
// Non-throwing form: false and `st` filled on failure (nothing written).
bool dequantize(ggml_type t, std::span<const std::byte> blocks, dtype out, std::span<std::byte> dst,
                unsigned threads, status& st) noexcept;

// One tensor for a dequantize_queue. The buffers are the caller's: they must
// stay valid, and `dst` untouched, until the queue's wait() has returned.
struct dequantize_job {
    ggml_type type = ggml_type::F32;
    std::span<const std::byte> blocks;  // whole blocks of `type`
    dtype out = dtype::F32;              // F32, F16 or BF16
    std::span<std::byte> dst;            // at least the output's size; only that much is written
    std::string name;                    // the tensor's name, for error messages (may be empty)
    // Called once when the whole tensor is in dst, on the thread that finished
    // it (a worker, or the caller inside wait()). Keep it short; an exception
    // it throws is rethrown by wait(). Not called for a job dropped by cancel().
    std::function<void()> on_done;
};

// A queue of tensors dequantized in the background by a few threads of the
// engine's pool, as they are submitted: a reader's on_tensor_done callback
// submits each tensor as its bytes land, while later reads are in flight.
// submit(), cancel() and wait() may be called from any threads at once.
class dequantize_queue {
public:
    // At most `threads` threads dequantize at once (0 = one per CPU).
    explicit dequantize_queue(unsigned threads = 0);
    dequantize_queue(const dequantize_queue&) = delete;
    dequantize_queue& operator=(const dequantize_queue&) = delete;
    // Drops the work not started (as cancel()) and waits for the rest: no
    // thread touches a job's buffers after it. Call wait() to have it all done.
    ~dequantize_queue();

    // Checks the job as dequantize() does (InvalidArgument, BufferTooSmall,
    // naming the job's tensor) and queues it; returns at once.
    void submit(dequantize_job job);
    bool submit(dequantize_job job, status& st) noexcept;

    // Blocks until every submitted job is done (or dropped), the calling thread
    // helping; then rethrows the first exception an on_done threw, once.
    void wait();
    // wait() for about `timeout`: true when every job is done, false on timeout
    // (then call it again, or cancel()). The caller helps meanwhile, so it may
    // return one piece of work (at most 16 MiB of output) and an on_done late.
    // Lets a caller that waits watch for Ctrl-C. Rethrows as wait() does when done.
    bool wait_for(std::chrono::milliseconds timeout);
    // Drops every queued piece of work not yet started (their tensors' dst hold
    // partial values, and their on_done is not called); running pieces finish.
    // Jobs submitted afterwards run as usual.
    void cancel() noexcept;

    struct state;

private:
    std::unique_ptr<state> s_;
};

}  // namespace ringsafe
