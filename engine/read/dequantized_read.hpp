// Whole GGUF tensors read and dequantized as their bytes land: each tensor's
// raw blocks are read into staging and handed to a dequantize_queue the moment
// the read of its last byte completes, while the reads of later tensors are
// still in flight (engine-internal; the Python front end's ringsafe.gguf).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "ringsafe/dtype.hpp"
#include "ringsafe/plan.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe::read {

// One tensor to read: its bytes as stored (out empty), or its values
// dequantized (or converted, for F32/F16/BF16 tensors) to `out`.
struct dequantized_target {
    std::uint32_t tensor = 0;     // index into reader::tensors()
    std::span<std::byte> dst;     // at least the tensor's bytes / its values' bytes
    std::optional<dtype> out;     // F32, F16 or BF16; nullopt: the bytes as stored
};

struct dequantized_read_options {
    unsigned threads = 0;                          // dequantizing threads (0 = one per CPU)
    std::uint64_t staging_bytes = 256ull << 20;    // raw blocks read per batch (a larger tensor is a batch alone)
};

// Reads every target (in the given order, data order reads best), through
// batches of at most staging_bytes of raw blocks (a larger tensor is a batch
// alone), read into two staging buffers in turn (one being read, one still
// being dequantized), each kept and reused from batch to batch: memory beyond
// the destinations is at most 2 x max(staging_bytes, the largest tensor's
// blocks). Throws before any I/O: InvalidArgument (an
// index out of range or given twice; a type it cannot dequantize, naming the
// tensor and type; not a GGUF tensor) or BufferTooSmall (naming the tensor);
// afterwards the reader's errors, or Cancelled when ctl.cancel is set (no
// thread touches a destination after it returns). ctl.on_progress sees the
// raw bytes landed over all batches; ctl.on_tensor_done is not called.
void read_dequantized(reader& r, std::span<const dequantized_target> targets,
                      const dequantized_read_options& o = {}, const read_control& ctl = {});

}  // namespace ringsafe::read
