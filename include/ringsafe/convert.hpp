// Converting a checkpoint into a new file, chosen by the target's extension
// (what `ringsafe cp` and Python's ringsafe.convert run):
//  * GGUF -> safetensors: plain tensors keep their type; block types (Q4_K,
//    ...) are dequantized to `dequantize_to`; the GGUF metadata goes into
//    __metadata__ as "gguf.KEY": its value's JSON text (split.* keys and the
//    streaming writer's padding dropped). Optionally a sharded checkpoint.
//  * safetensors -> GGUF: dtypes GGUF has (F32, F16, BF16, F64, I8..I64),
//    shapes reversed into ne, __metadata__ as STRING entries. Names are kept
//    (llama.cpp's names per architecture are convert_hf_to_gguf.py's job).
//  * GGUF -> GGUF: tensors (blocks too) and metadata as they are; a split set
//    becomes one file, or one file a split set named as llama.cpp's gguf-split
//    names it.
//  * safetensors -> safetensors: a copy of the selection (or a resharding).
// Reading and writing run as a pipeline: `buffers` buffers of `buffer_size`
// bytes, read into by reader threads while the streaming writer writes the
// batches in order straight from them, so memory stays at about
// buffers x buffer_size (+ the writer's staging) whatever the file's size.
// Every check of the target's format runs before any byte is written; the
// output is published by rename only when everything is written and synced,
// so an error or a cancel leaves nothing at the target path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringsafe/dtype.hpp"
#include "ringsafe/plan.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe {

// The bounds convert_file() accepts for its buffers.
inline constexpr std::uint64_t convert_min_buffer = 1u << 20;
inline constexpr std::uint64_t convert_max_buffer = 16ull << 30;
inline constexpr std::uint64_t convert_max_buffers = 1024;

// What to convert and how.
struct convert_options {
    // How the source is opened: file and HTTP options (connections, chunk,
    // credentials, ...), header limits, as reader::open takes them. URL
    // sources: two reader threads, each with half the connections.
    reader_options read;
    std::vector<std::string> select;   // globs over tensor names (*, ?, [...]); empty: every tensor
    dtype dequantize_to = dtype::F32;  // GGUF block tensors in a safetensors target: F32 (exact), F16 or BF16
    // A safetensors target as a sharded checkpoint (OUT-00001-of-0000N.safetensors
    // + OUT.safetensors.index.json, transformers' names and cut): a new shard
    // before a tensor that would take it past this many bytes (0: one file).
    std::uint64_t max_shard_size = 0;
    // A GGUF target as a split set (OUT-00001-of-0000N.gguf with split.* keys,
    // the metadata in the first part): a new part before a tensor that would
    // take it past split_max_size bytes of tensor data or split_max_tensors
    // tensors (0: no limit). Parts are published one by one.
    std::uint64_t split_max_size = 0, split_max_tensors = 0;
    // Bytes per pipeline buffer, convert_min_buffer..convert_max_buffer,
    // rounded up to 4096; and their count, 2..convert_max_buffers.
    std::uint64_t buffer_size = 64u << 20;
    std::uint64_t buffers = 4;
    bool direct = true;  // O_DIRECT writes where the filesystem allows
    bool sync = true;    // fsync each file and its directory before and after publishing it
};

// What a conversion did.
struct convert_result {
    std::uint64_t bytes = 0;          // source bytes of the selected tensors
    std::size_t tensors = 0;          // tensors written
    std::vector<std::string> files;   // the paths published, in order (shards or parts, then an index)
    std::size_t buffers = 0;          // pipeline buffers allocated (peak)
    std::uint64_t buffer_bytes = 0;   // bytes per buffer (buffer_size, or less when the largest batch is smaller)
    unsigned readers = 0;             // reader threads (1 for local files, 2 for URLs)
    double seconds = 0;
    double write_waited = 0;          // seconds the writer waited for reads
    double read_waited = 0;           // seconds readers waited for a free buffer, summed over readers
};

// True when `path` names a GGUF target (ends in .gguf, any case); any other
// name is a safetensors target.
bool gguf_target(const std::string& path);

// llama.cpp's name of part `no` (0-based) of `count` for OUT.gguf: OUT-00001-of-00003.gguf.
std::string split_part_name(const std::string& out, std::size_t no, std::size_t count);

// Converts the selected tensors and the metadata of `source` (a path, a URL,
// a sharded *.index.json, a GGUF file or any part of a split set) into
// `target`, by its extension, as above. `control`: on_progress(done, total)
// in source bytes (on the writing thread, first with done = 0),
// on_tensor_done(position in the selection, tensor) once a tensor's last
// bytes went to the writer (they are on disk when convert_file returns),
// cancel: set it from any thread to stop (errc::Cancelled; nothing at the
// target). Throws InvalidArgument naming the tensor (a dtype GGUF lacks, more
// than 4 dimensions, a name over ggml's limit, a type that cannot be
// dequantized) or the option before creating anything; IoError "copying 'SRC'
// to 'OUT': ..." for a failed read or write.
convert_result convert_file(const std::string& source, const std::string& target, const convert_options& options = {},
                            const read_control& control = {});

}  // namespace ringsafe
