// What `ls` and `verify` need from a reader: a header-shaped listing of every
// shard's tensors, and each tensor's SHA-256 read through the reader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ringsafe/header.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe::cli {

// The reader's tensors (shard by shard, data order within; offsets relative to
// each shard's data section) and metadata as a header, for print_listing_*.
// header_size is the sum of the shards' N; data_size the sum of tensor sizes.
header listing_header(const reader& r);

// Lowercase hex SHA-256 of each tensor's bytes, in r.tensors() order. Reads
// through the reader in batches of at most `batch` bytes (two buffers: the next
// batch is read while the previous one is hashed), so memory stays bounded
// for any checkpoint size. Throws the reader's errors (Truncated, IoError, ...).
std::vector<std::string> sha256_per_tensor(reader& r, std::uint64_t batch = 8u << 20);

}  // namespace ringsafe::cli
