// GGUF files made for tests: small models with pattern bytes, split sets as
// llama.cpp's gguf-split names them, and a realistic tokenizer header (a
// byte-level BPE vocabulary and its merges, as llama.cpp's converter writes them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "ringsafe/gguf.hpp"

namespace ringsafe::test {

// A whole GGUF file: the header gguf::serialize makes, then each tensor's
// bytes (tensor i: fill_pattern(seed + i)), each padded to `alignment`.
std::vector<std::byte> make_gguf(const std::vector<gguf::metadata_entry>& metadata,
                                 const std::vector<gguf::tensor_record>& tensors, std::uint64_t seed = 0,
                                 std::uint32_t alignment = gguf::default_alignment);
// The bytes make_gguf gives tensor i of `nbytes` bytes.
std::vector<std::byte> gguf_tensor_bytes(std::uint64_t nbytes, std::uint64_t seed, std::size_t i);

// llama.cpp's name of part `part` (1-based) of `count`: STEM-00002-of-00003.gguf.
std::string split_name(const std::string& stem, std::size_t part, std::size_t count);
// The split keys gguf-split writes into every part.
std::vector<gguf::metadata_entry> split_keys(std::size_t no, std::size_t count, std::size_t tensors_count);

// Metadata of a llama model with a tokenizer of `vocab` tokens (BPE-like
// strings, 'Ġ' marking a leading space), their types, `merges` merges and a
// chat template, in the order llama.cpp's converter writes them.
std::vector<gguf::metadata_entry> llama_metadata(std::size_t vocab, std::size_t merges);
// The tensor records of `layers` llama blocks (Q4_K, Q6_K and F32 norms; `width` a multiple of 256).
std::vector<gguf::tensor_record> llama_tensors(std::size_t layers, std::uint64_t width, std::uint64_t vocab);

// Writes a GGUF header (metadata and tensors) to `path` and extends the file
// to the size its data section needs, without writing the data (a sparse
// file of zeros). Returns the header's size (the data section's offset).
std::uint64_t write_gguf_header_only(const std::filesystem::path& path,
                                     const std::vector<gguf::metadata_entry>& metadata,
                                     const std::vector<gguf::tensor_record>& tensors);

}  // namespace ringsafe::test
