// Sharded checkpoints: `model.safetensors.index.json`, whose `weight_map` maps
// each tensor name to the shard file holding it, e.g.
//   {"metadata": {"total_size": 1234}, "weight_map": {"w": "model-00001-of-00002.safetensors"}}
// reader::open() uses these to present the shards as one checkpoint (how it
// names the shards and recognises an index: reader.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ringsafe/header.hpp"

namespace ringsafe {

// A parsed index file.
struct shard_index {
    // The "metadata" object (nullopt when absent or null). String values are
    // kept as they are; other values as compact JSON text ("1234", "true").
    std::optional<metadata_map> metadata;
    // Distinct shard file names of the weight_map, sorted byte-wise.
    std::vector<std::string> shards;
    // Tensor name -> index into `shards`, sorted by tensor name.
    std::vector<std::pair<std::string, std::uint32_t>> weight_map;

    // The shard index a tensor is mapped to, or -1 when it is not in the map.
    std::int64_t shard_of(std::string_view tensor) const noexcept;
};

// Parses an index file's JSON text. Throws ringsafe::error(InvalidIndex) naming
// `name` (the index's path or URL) when the text is not a JSON object with a
// "weight_map" object of string values, when a tensor is mapped twice, or when
// a shard name is empty, absolute, contains a `..` component or a backslash.
// Unknown top-level keys are ignored.
shard_index parse_index(std::string_view json, const std::string& name);

}  // namespace ringsafe
