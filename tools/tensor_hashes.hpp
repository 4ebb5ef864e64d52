// What `ls` and `verify` need from a reader: a listing of every shard's
// tensors, and each tensor's SHA-256 read through the reader.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ringsafe/header.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe::cli {

// The reader's tensors (shard by shard, data order within; offsets relative to
// each shard's data section) and metadata, viewed, not copied.
struct listing {
    std::span<const tensor_info> tensors;
    const std::optional<metadata_map>* metadata = nullptr;
    std::uint64_t header_size = 0;  // the shards' header bytes (safetensors: N each; GGUF: up to the data section)
    std::uint64_t data_size = 0;    // the sum of tensor sizes
};
listing listing_of(const reader& r);

using sha256_digest = std::array<unsigned char, 32>;
// Lowercase hex.
std::string hex_digest(const sha256_digest& d);

// Digests kept in tensor order until they are printed: in memory for up to
// `in_memory` tensors, beyond that in an unnamed temporary file in $TMPDIR
// (else /tmp; in memory when neither can hold one), 32 bytes per tensor, so
// `verify` of millions of tensors does not grow with their number.
class digest_store {
public:
    explicit digest_store(std::size_t tensors, std::size_t in_memory = 1u << 16);
    ~digest_store();
    digest_store(const digest_store&) = delete;
    digest_store& operator=(const digest_store&) = delete;

    void append(const sha256_digest& d);  // the next tensor's digest
    void rewind();                        // then next() gives them again from the first
    sha256_digest next();

private:
    std::vector<sha256_digest> memory_;
    std::FILE* file_ = nullptr;
    std::size_t read_ = 0;
};

// SHA-256 of each tensor's bytes, appended to `out` in r.tensors() order.
// Reads through the reader in batches of at most `batch` bytes and
// `max_pieces` pieces (two buffers: the next batch is read while the previous
// one is hashed), so memory stays bounded for any checkpoint. Throws the
// reader's errors (Truncated, IoError, ...).
void sha256_per_tensor(reader& r, digest_store& out, std::uint64_t batch = 8u << 20,
                       std::size_t max_pieces = 16384);

}  // namespace ringsafe::cli
