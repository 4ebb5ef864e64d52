// ggml's checks of a GGUF header, each with its errc kind (internal to
// engine/format/gguf). The parser calls them at the read that could fail them,
// in ggml's order; each throws ringsafe::error naming the key, tensor or offset.
#pragma once

#include <cstdint>
#include <string>

#include "ringsafe/ggml_type.hpp"
#include "ringsafe/gguf.hpp"

namespace ringsafe::format::gguf {

// The magic (BadMagic), then the version: 0, 1 or above 3 BadVersion, low 16
// bits zero BadEndian (a file of the other byte order).
void check_magic(const char* first4);
void check_version(std::uint32_t version);
// The tensor and key-value counts (BadCount): negative, or more than ggml can index.
void check_counts_tensors(std::int64_t n);
void check_counts_kv(std::int64_t n);

// A value type id read for key `key`; `element`: an array's element type
// (ARRAY is refused there). BadKV naming the key and the id.
void check_value_type(std::uint32_t id, const std::string& key, bool element);

// general.alignment, if present: a UINT32 scalar, a power of two (BadAlignment). Returns the alignment.
std::uint32_t alignment_of(const ringsafe::gguf::metadata_entry* e);

// One tensor info's dimensions and type, as ggml checks them (BadTensorInfo):
// n_dims at most 4; each ne >= 0; the element count below INT64_MAX; the
// type an id ggml has (not removed); ne[0] a multiple of its block size; the
// size in bytes within 64 bits. `ne` holds 4 entries (1 past n_dims).
void check_n_dims(const std::string& name, std::uint32_t n_dims);
void check_ne(const std::string& name, std::uint32_t j, std::int64_t ne);
void check_elements(const std::string& name, const std::int64_t ne[4]);
// Returns the tensor's size in bytes.
std::uint64_t check_type(const std::string& name, std::int32_t type, const std::int64_t ne[4]);

// The data section after the tensor infos end at `info_end`: its padded start
// (Truncated when the file ends first; with no tensors, unpadded), every
// tensor's offset the running padded sum (BadOffset), the sum itself (sets
// data_offset and data_size), and the data within `file_size` (DataPastEnd).
// `sizes` holds each tensor's bytes; the tensors' `end` is set here.
void place_tensors(ringsafe::gguf::header& h, const std::vector<std::uint64_t>& sizes, std::uint64_t file_size);

}  // namespace ringsafe::format::gguf
