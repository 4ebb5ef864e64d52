// What both GGUF writers (gguf_writer.hpp) check and build before any byte
// is written: the metadata as it will be stored, tensor sizes, names.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ringsafe/gguf_writer.hpp"

namespace ringsafe::write {

// `metadata` as a GGUF writer stores it: general.alignment added when the
// alignment is not 32 and it is absent, a stale padding entry dropped, every
// entry checked as the serializer does. InvalidArgument for an alignment
// that is not a power of two or that general.alignment contradicts.
std::vector<gguf::metadata_entry> stored_metadata(std::vector<gguf::metadata_entry> metadata,
                                                  std::uint32_t alignment);

// Where the tensor infos of gguf::serialize(metadata, tensors, alignment) end,
// before its padding to `alignment`; checked as gguf::serialized_size checks.
std::uint64_t unpadded_size(std::span<const gguf::metadata_entry> metadata, std::span<const gguf::tensor_record> tensors,
                            std::uint32_t alignment);

// The padding entry holding `spaces` bytes of slack.
gguf::metadata_entry padding_entry(std::uint64_t spaces);

}  // namespace ringsafe::write
