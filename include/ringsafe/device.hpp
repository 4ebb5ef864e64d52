// GPU destinations: tensors read straight into device (CUDA) memory.
//
//   auto r = ringsafe::reader::open("model.safetensors");
//   auto sel = r.select({"lm_head.weight"});
//   std::vector<ringsafe::device_span> dsts = {{cuda_ptr, bytes}};
//   ringsafe::read_to_device(r, sel, dsts, {.device = 0});
//
// Reads land in a bounded ring of staging buffers (pinned host memory) through
// the reader's own plans and executors; an asynchronous copier moves each
// staged piece to its place in device memory while the next reads run, and
// the copy's completion returns the buffer to the ring. A destination that is
// host memory (pinned or not) is read into directly. The CUDA runtime is
// loaded at run time (libcudart.so.12, .13, .11, libcudart.so; or the file
// RINGSAFE_CUDART names) on the first device read: ringsafe needs no CUDA to
// build or run. The host stand-in (device_options::stand_in) runs the same
// pipeline with a thread copying into host memory that plays the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ringsafe/error.hpp"
#include "ringsafe/plan.hpp"
#include "ringsafe/selection.hpp"

namespace ringsafe {

class reader;

// Caller memory on a device (a CUDA device pointer), or host memory with the
// stand-in. Never owned: it must stay valid until read_to_device() returns.
struct device_span {
    void* data = nullptr;
    std::size_t size = 0;
};

// How read_to_device() stages and copies.
struct device_options {
    int device = 0;                            // CUDA device index the destinations live on
    std::size_t staging_size = 16u << 20;      // bytes per staging buffer (at least 1)
    std::size_t staging_count = 4;             // staging buffers in the ring (at least 2)
    // Copy with the host stand-in instead of CUDA: destinations are host
    // memory playing the device; no CUDA runtime is loaded.
    bool stand_in = false;
    // The caller's CUDA stream (a cudaStream_t, e.g. PyTorch's
    // torch.cuda.current_stream().cuda_stream; nullptr is the legacy default
    // stream). The copies start after the work queued on it before the call,
    // and work queued on it after the call starts after the copies.
    void* stream = nullptr;
};

// What a read_to_device() call did.
struct device_read_stats {
    std::uint64_t staged_bytes = 0;   // bytes that went through staging buffers
    std::uint64_t direct_bytes = 0;   // bytes read straight into host-memory destinations
    std::uint64_t batches = 0;        // staging buffers filled (one read plan each)
    std::uint64_t copies = 0;         // pieces copied to the device
};

// Reads the selected tensors into `dsts`, one per tensor in selection order
// (dsts.size() must equal sel.size(); BufferTooSmall names the tensor and
// sizes; InvalidArgument for overlapping destinations or bad options), all
// checked before any I/O. `ctl`: progress counts bytes in place on the device,
// on_tensor_done runs once a tensor's last copy completed, `cancel` stops
// between staging buffers (Cancelled). Throws ringsafe::error: InvalidArgument
// naming what is missing when the CUDA runtime cannot be loaded, IoError naming
// the tensor and CUDA's error text when a copy fails, or the reader's errors.
// On return (also on failure) no read or copy is in flight and every staging
// buffer is freed; destinations may then hold partial data.
device_read_stats read_to_device(reader& r, const selection& sel, std::span<const device_span> dsts,
                                 const device_options& opts = {}, const read_control& ctl = {});
// Non-throwing form: false and `st` filled on failure.
bool read_to_device(reader& r, const selection& sel, std::span<const device_span> dsts,
                    const device_options& opts, const read_control& ctl, status& st) noexcept;

// A staging ring and copier kept across device reads: the pinned buffers and
// the CUDA stream are made on first use and reused by every read(), so a
// caller reading one tensor at a time (safe_open's get_tensor, a streamed
// load's batches) pays for them once. read()s run one at a time (a mutex).
class device_stager {
public:
    // Checks `opts` (InvalidArgument as read_to_device()); loads nothing yet.
    explicit device_stager(const device_options& opts = {});
    ~device_stager();  // frees the staging buffers (no copy is in flight between reads)
    device_stager(device_stager&&) noexcept;
    device_stager& operator=(device_stager&&) noexcept;

    // read_to_device() through this stager's ring: the same checks, errors and
    // guarantees, ordered against the caller's `stream` (as device_options::stream;
    // the stager's own options' stream is not used). After any failure (a copy,
    // a read, a cancel) the ring and the copier are freed, and the next read
    // makes them anew.
    device_read_stats read(reader& r, const selection& sel, std::span<const device_span> dsts,
                           const read_control& ctl = {}, void* stream = nullptr);
    // Staging buffers held now (at most the options' staging_count).
    std::size_t staging_buffers() const;
    // Frees the staging buffers and the copier now; the next read makes them again.
    void release();
    const device_options& options() const noexcept;

private:
    friend struct device_stager_access;  // the engine's tests' hooks into the stand-in (engine/device)
    struct impl;
    std::unique_ptr<impl> impl_;
};

// True when the CUDA runtime can be loaded; otherwise false, with the reason in `why` when given.
bool cuda_runtime_available(std::string* why = nullptr) noexcept;

}  // namespace ringsafe
