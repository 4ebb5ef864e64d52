// Writing GGUF files in one pass, with the safetensors writer's guarantees:
// a temporary beside the target, renamed into place only by a successful
// finish(); an exception, abandon(), destruction without finish(), a full
// disk or an I/O error leave nothing at the target path.
//
// Two ways to write:
//  * gguf::declared_writer: every tensor (name, ggml type, ne) is declared up
//    front, so the header is exact (gguf::serialize's bytes, no padding entry)
//    and tensor bytes may arrive in any order, from several threads.
//  * gguf::writer (streaming): tensors arrive one by one. The data section
//    must start at the aligned end of the tensor infos, which are not known
//    yet, so header space is reserved at the start of the file, the data is
//    streamed behind it with io_uring (O_DIRECT where the filesystem allows),
//    and finish() writes the header into the reservation, the slack held by
//    a metadata entry `ringsafe.padding` (a STRING of spaces) so that the data
//    never moves. When the header outgrows the reservation the data moves
//    once, in the kernel (FALLOC_FL_INSERT_RANGE, else copy_file_range), as
//    the safetensors writer's relocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringsafe/gguf.hpp"
#include "ringsafe/writer.hpp"

namespace ringsafe::gguf {

// The key of the streaming writer's padding entry (a STRING of spaces).
inline constexpr std::string_view padding_key = "ringsafe.padding";

// How a GGUF writer writes.
struct writer_options {
    // Data alignment (a power of two): each tensor starts at a multiple of it.
    // Other than 32, general.alignment (UINT32) is added to the metadata when
    // absent; when present it must say the same (InvalidArgument otherwise).
    std::uint32_t alignment = default_alignment;
    // Streaming only. Bytes reserved for the header (the data section's
    // offset, rounded up to a multiple of 4096 and of `alignment`); 0 = the
    // metadata given to the constructor + expected_tensors x (expected_name_length + 72)
    // + expected_metadata_bytes for metadata given only at finish().
    std::uint64_t reserve_bytes = 0;
    std::uint64_t expected_tensors = 1024;
    std::uint64_t expected_name_length = 48;
    std::uint64_t expected_metadata_bytes = 4096;
    // Streaming only: true throws ReservationExceeded at finish() instead of
    // relocating; relocate_in_place as ringsafe::writer_options.
    bool strict_reservation = false;
    bool relocate_in_place = true;
    bool direct = true;                    // streaming only: O_DIRECT for the data where allowed
    std::uint64_t block_size = 16u << 20;  // streaming only: bytes per write, a multiple of 4096
    unsigned staging_blocks = 3;
    unsigned queue_depth = 4;
    bool sync = true;      // fsync the file before publishing it
    bool sync_dir = true;  // fsync the directory after the rename
};

// Bytes of a tensor of `type` and `ne` (ggml order). BadTensorInfo naming the
// tensor for what ggml's reader refuses (name over 63 bytes, more than 4
// dims, a negative or overflowing ne, a row not a whole number of blocks, a
// removed type).
std::uint64_t tensor_bytes(const tensor_record& t);

// The streaming writer. Not thread-safe: one thread calls it.
class writer {
public:
    // Starts a new file destined for `path` with `metadata` (entries in file
    // order; finish() may replace them). Checks the entries as the serializer
    // does (BadKV, DuplicateKey, ...). Throws ringsafe::error naming the path.
    explicit writer(const std::string& path, std::vector<metadata_entry> metadata = {},
                    const writer_options& opts = {});
    ~writer();  // abandons the file when finish() did not succeed
    writer(writer&&) noexcept;
    writer& operator=(writer&&) noexcept;

    // Adds a whole tensor: `bytes` must hold exactly tensor_bytes(t) bytes
    // (InvalidArgument otherwise); copied before the call returns. The
    // tensor's checks (tensor_bytes(), DuplicateTensor) leave the writer usable;
    // an I/O error abandons the file and throws naming tensor and offset.
    void add(const tensor_record& t, std::span<const std::byte> bytes);
    // Chunked form: begin(), append() calls adding up to tensor_bytes(t), end().
    void begin(const tensor_record& t);
    void append(std::span<const std::byte> bytes);
    void end();  // WriterState naming the tensor when its bytes are incomplete

    // Writes the header (with `metadata` in place of the constructor's when
    // given), syncs and publishes. After an error nothing is at the target.
    void finish(const std::vector<metadata_entry>* metadata = nullptr);
    // Drops everything written and removes the temporary. Never throws; idempotent.
    void abandon() noexcept;

    // What was written: header_reserved is the data section's offset,
    // header_json the header's bytes without the padding entry's slack.
    const writer_stats& stats() const noexcept;

    struct impl;

private:
    std::unique_ptr<impl> impl_;
};

// Declared mode: the header is gguf::serialize(metadata, tensors, alignment),
// the tensors in data order. Thread-safe: write() may be called from several
// threads at once; finish() and abandon() must not overlap a write().
class declared_writer {
public:
    // Validates everything (as the serializer) and writes the header to a
    // temporary beside `path`. Only alignment, sync and sync_dir of `opts` apply.
    declared_writer(const std::string& path, std::vector<metadata_entry> metadata, std::vector<tensor_record> tensors,
                    const writer_options& opts = {});
    ~declared_writer();  // abandons unless finished
    declared_writer(const declared_writer&) = delete;
    declared_writer& operator=(const declared_writer&) = delete;

    // Index of a declared tensor (TensorNotFound otherwise).
    std::size_t index(std::string_view name) const;
    std::uint64_t data_offset() const noexcept;       // absolute offset of the data section
    std::uint64_t offset(std::size_t tensor) const;   // tensor's offset, relative to the data section
    std::uint64_t size(std::size_t tensor) const;     // tensor's bytes (unpadded)

    // Writes `bytes` at `offset` within tensor `tensor` with pwrite from the
    // caller's thread. InvalidArgument when the range exceeds the tensor; an
    // I/O error abandons the file and names the tensor and offset.
    void write(std::size_t tensor, std::uint64_t offset, std::span<const std::byte> bytes);
    // Every tensor must be complete (WriterState naming the first incomplete
    // one); pads the data section, syncs and publishes.
    void finish();
    void abandon() noexcept;  // removes the temporary; never throws

    struct impl;

private:
    std::unique_ptr<impl> impl_;
};

}  // namespace ringsafe::gguf
