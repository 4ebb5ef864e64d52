// Where a conversion writes, chosen by the target's extension: a safetensors
// file or sharded checkpoint (GGUF block tensors dequantized, GGUF metadata
// under `gguf.` keys as JSON text) or a GGUF file or split set (safetensors
// dtypes GGUF has, shapes reversed into ne, __metadata__ as STRING entries;
// GGUF blocks passed through). Every check runs when the sink is made, before
// any byte (engine-internal: convert_file's stage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ringsafe/dtype.hpp"
#include "ringsafe/gguf_writer.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe::convert {

// Keys of a GGUF source that describe its layout, not the model, and that no
// target copies: a split set's keys (a target has its own, or none) and the
// streaming writer's padding.
inline bool layout_key(std::string_view key) { return key.starts_with("split.") || key == gguf::padding_key; }

// The sinks' share of convert_options.
struct sink_options {
    dtype dequantize_to = dtype::F32;  // F32, F16 or BF16
    bool direct = true, sync = true;
    std::uint64_t split_max_bytes = 0, split_max_tensors = 0;  // a GGUF target as a split set (0: no limit)
    std::uint64_t max_shard_bytes = 0;                          // a safetensors target as shards (0: one file)
};

// A destination for the selected tensors, in selection order: begin(),
// append() of the source's bytes (in pieces of any size), end(); then finish().
class sink {
public:
    virtual ~sink() = default;
    virtual void begin(const tensor_info& t) = 0;
    // `hold` keeps `bytes` alive until the sink has written them.
    virtual void append(std::span<const std::byte> bytes, std::shared_ptr<const void> hold) = 0;
    virtual void end() = 0;
    virtual unsigned writes_in_flight() const noexcept = 0;
    virtual void wait_write() = 0;  // reaps a write (releasing its hold); no-op when none
    virtual void finish() = 0;      // publishes the file (the last one of a set, then its index)
    virtual void abandon() noexcept = 0;
    // The paths published so far, in order.
    const std::vector<std::string>& files() const noexcept { return files_; }

protected:
    std::vector<std::string> files_;
};

// The sink for `out` by its extension (gguf_target), for the tensors `sel`
// of `r`. Throws (InvalidArgument naming the tensor or key) before creating
// anything when a tensor cannot be written to that format.
std::unique_ptr<sink> make_sink(const reader& r, const selection& sel, const std::string& out, const sink_options& o);

// The two kinds make_sink chooses from.
std::unique_ptr<sink> make_safetensors_sink(const reader& r, const selection& sel, const std::string& out,
                                            const sink_options& o);
std::unique_ptr<sink> make_gguf_sink(const reader& r, const selection& sel, const std::string& out,
                                     const sink_options& o);

}  // namespace ringsafe::convert
