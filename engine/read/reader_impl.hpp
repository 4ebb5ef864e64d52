// The reader's state, shared by the files of engine/read.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ringsafe/index.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe {

struct reader::impl {
    // One shard's source; the mutex serializes execute() calls on it.
    struct shard_io {
        std::unique_ptr<source> src;
        std::mutex busy;
    };

    std::uint64_t id = 0;  // unique per reader: plans and selections carry it
    std::string spec;
    bool sharded = false;
    reader_options opts;
    std::vector<tensor_info> tensors;        // shard by shard, data order within
    std::vector<std::uint32_t> shard_of;     // per tensor
    std::vector<std::uint32_t> by_name;      // tensor indices sorted by name
    std::vector<shard_info> shards;
    std::vector<std::unique_ptr<shard_io>> io;  // per shard
    std::optional<metadata_map> metadata;
    std::uint64_t total_bytes = 0;

    // Appends one opened shard with its parsed header.
    void add_shard(std::string spec, std::unique_ptr<source> src, header h);
    // Builds by_name and total_bytes; throws InvalidIndex/DuplicateTensorName
    // when a name appears in two shards.
    void finish();
    std::unique_ptr<source> open_source_for(const std::string& spec) const;
    void check_selection(const selection& sel) const;
};

namespace detail {

// A unique id for a new reader.
std::uint64_t next_reader_id() noexcept;
// Opens the shards named by `index` (read from `index_spec`) in parallel and
// checks them against its weight_map; fills `r`.
void open_shards(reader::impl& r, const std::string& index_spec, const shard_index& index);
// Runs a plan's ops on the reader's shards (see reader::execute).
void execute_plan(reader::impl& r, const read_plan& plan, const read_control& ctl);

}  // namespace detail
}  // namespace ringsafe
