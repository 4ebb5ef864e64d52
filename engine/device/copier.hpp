// The copier seam of the device pipeline: staging memory, and asynchronous
// copies from staging buffers into device memory, per staging slot. Two
// implementations: CUDA (a stream and one event per slot) and the host
// stand-in (a thread memcpy'ing into host memory that plays the device), so
// the whole pipeline runs and is tested without a GPU (engine-internal).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ringsafe::device {

// One staging buffer's memory, freed by `release` on destruction. Move-only.
class staging_block {
public:
    staging_block() = default;
    staging_block(std::byte* data, std::size_t size, std::function<void(std::byte*)> release)
        : data_(data), size_(size), release_(std::move(release)) {}
    staging_block(staging_block&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), release_(std::move(o.release_)) {}
    staging_block& operator=(staging_block&& o) noexcept {
        if (this != &o) {
            reset();
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
            release_ = std::move(o.release_);
        }
        return *this;
    }
    staging_block(const staging_block&) = delete;
    ~staging_block() { reset(); }
    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }

private:
    void reset() noexcept {
        if (data_ && release_) release_(std::exchange(data_, nullptr));
    }
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::function<void(std::byte*)> release_;
};

// One copy: `size` bytes from staging memory to device memory. `tensor` and
// `offset` (bytes into the tensor) are for error messages.
struct copy_piece {
    void* dst = nullptr;
    const std::byte* src = nullptr;
    std::size_t size = 0;
    const std::string* tensor = nullptr;
    std::uint64_t offset = 0;
};

// "tensor 'NAME' bytes [A, B)": what a copy error names.
inline std::string describe_piece(const copy_piece& p) {
    return "tensor '" + (p.tensor ? *p.tensor : std::string("?")) + "' bytes [" + std::to_string(p.offset) + ", " +
           std::to_string(p.offset + p.size) + ")";
}

// Moves staged bytes to the device. submit() and wait() are called from one
// thread; a slot is waited for before it is submitted again. Every submitted
// slot must be waited for before the staging memory it reads is freed.
// Copies are ordered against the caller's stream (PyTorch's current stream):
// after_stream() before the first submit, before_stream() once every slot was
// waited for, so that neither memory the caller's queued work still uses nor
// memory it reuses later is written out of order.
class copier {
public:
    // Finishes every queued copy (the staging memory they read must outlive the copier).
    virtual ~copier() = default;
    // Memory for one staging buffer (pinned host memory with CUDA).
    virtual staging_block allocate_staging(std::size_t size) = 0;
    // False when reads may land in `dst` directly (host memory, pinned or not).
    virtual bool needs_staging(const void* dst) = 0;
    // Starts `pieces`' copies in order and returns without waiting for them.
    // Throws ringsafe::error (IoError naming the tensor) when a copy cannot be started.
    virtual void submit(std::size_t slot, std::vector<copy_piece> pieces) = 0;
    // Blocks until `slot`'s copies are done. Throws ringsafe::error (IoError)
    // naming the tensor and the device's error text when one failed.
    virtual void wait(std::size_t slot) = 0;
    // Copies submitted from now on start only after the work queued on the
    // caller's `stream` so far (a cudaStream_t; nullptr is the legacy default
    // stream): an event recorded on it, waited for by the copier's stream.
    virtual void after_stream(void* stream) = 0;
    // Work queued on the caller's `stream` from now on starts only after every
    // copy submitted so far: an event recorded on the copier's stream, waited
    // for by `stream`.
    virtual void before_stream(void* stream) = 0;
    // "CUDA device N" or "the host stand-in", for messages.
    virtual std::string describe() const = 0;
};

// The CUDA copier for device `index` with `slots` staging slots. Throws
// InvalidArgument when the runtime cannot be loaded (see cuda_runtime()), or
// IoError with CUDA's error text when the device, stream or events cannot be set up.
std::unique_ptr<copier> make_cuda_copier(int index, std::size_t slots);

// The host stand-in's test hooks.
struct stand_in_hooks {
    // The copy of piece number N (0-based, counted over all submitted pieces) fails.
    std::optional<std::uint64_t> fail_piece;
    // Runs on the copier thread before each piece's copy, with its number.
    std::function<void(std::uint64_t piece)> before_copy;
    // Told each step in the order the stand-in takes it, from whichever thread
    // takes it: "wait for stream S", "copy N", "record done", "stream S waits
    // for done", "copier stopped", "staging freed" (S in hex).
    std::function<void(const std::string& step)> trace;
};

}  // namespace ringsafe::device
