// What `ringsafe cp` writes, chosen by the target's extension: a
// safetensors file (GGUF block tensors dequantized to --dtype, GGUF metadata
// under `gguf.` keys as JSON text) or a GGUF file (safetensors dtypes GGUF
// has, shapes reversed into ne, __metadata__ as STRING entries; GGUF blocks
// passed through). Every check runs when the sink is made, before any byte.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "ringsafe/dtype.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe::cli {

// True when `out` names a GGUF file (ends in .gguf, any case).
bool gguf_target(const std::string& out);

struct sink_options {
    dtype dequantize_to = dtype::F32;  // --dtype: F32, F16 or BF16
    bool direct = true, sync = true;
    // A GGUF target split into parts named as llama.cpp's gguf-split names them
    // (OUT-00001-of-00003.gguf), each with the split.* keys, the metadata in the
    // first: a new part before a tensor that would take it past split_max_bytes
    // of tensor data or split_max_tensors tensors (0: no limit). Parts are
    // published one by one as they are complete.
    std::uint64_t split_max_bytes = 0, split_max_tensors = 0;
    // A safetensors target as a sharded checkpoint (OUT-00001-of-00003.safetensors
    // + OUT.safetensors.index.json, transformers' names), a new shard before a
    // tensor that would take it past max_shard_bytes (0: one file). Shards are
    // published one by one, the index last.
    std::uint64_t max_shard_bytes = 0;
};

// A destination for the selected tensors, in selection order: begin(),
// append() of the source's bytes (in pieces of any size), end(); then finish().
class cp_sink {
public:
    virtual ~cp_sink() = default;
    virtual void begin(const tensor_info& t) = 0;
    // `hold` keeps `bytes` alive until the sink has written them.
    virtual void append(std::span<const std::byte> bytes, std::shared_ptr<const void> hold) = 0;
    virtual void end() = 0;
    virtual unsigned writes_in_flight() const noexcept = 0;
    virtual void wait_write() = 0;  // reaps a write (releasing its hold); no-op when none
    virtual void finish() = 0;      // publishes the file
    virtual void abandon() noexcept = 0;
};

// llama.cpp's name of part `no` (0-based) of `count` for OUT.gguf: OUT-00001-of-00003.gguf.
std::string split_part_name(const std::string& out, std::size_t no, std::size_t count);

// The sink for `out`: a safetensors or a GGUF file by its extension, for the
// tensors `sel` of `r`. Throws (InvalidArgument naming the tensor or key)
// before creating anything when a tensor cannot be written to that format.
std::unique_ptr<cp_sink> make_sink(const reader& r, const selection& sel, const std::string& out,
                                   const sink_options& o);

}  // namespace ringsafe::cli
