// The reader's state, shared by the files of engine/read.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "read/load_header.hpp"
#include "ringsafe/index.hpp"
#include "ringsafe/reader.hpp"

namespace ringsafe {

struct reader::impl {
    // One shard's source; the mutex serializes execute() calls on it. Shared:
    // a blocking-pool task of the async front end may outlive the reader.
    struct shard_io {
        std::unique_ptr<source> src;
        std::mutex busy;
    };

    std::uint64_t id = 0;  // unique per reader: plans and selections carry it
    std::string spec;
    bool sharded = false;
    reader_options opts;
    std::vector<tensor_info> tensors;        // shard by shard, data order within
    std::vector<std::uint32_t> by_name;      // tensor indices sorted by name
    std::vector<shard_info> shards;
    std::vector<std::shared_ptr<shard_io>> io;  // per shard
    std::optional<metadata_map> metadata;
    std::uint64_t total_bytes = 0;

    // The shard holding tensor `i` (a search over the shards' first tensors).
    std::uint32_t shard_of(std::uint32_t i) const noexcept;
    // Appends one opened shard with its parsed header.
    void add_shard(std::string spec, std::unique_ptr<source> src, read::shard_header h);
    // Builds by_name and total_bytes; throws InvalidIndex/DuplicateTensorName
    // when a name appears in two shards.
    void finish();
    std::unique_ptr<source> open_source_for(const std::string& spec) const;
    void check_selection(const selection& sel) const;
};

namespace read {

// A unique id for a new reader.
std::uint64_t next_reader_id() noexcept;
// A new reader's state for `spec`: its id and options (parallel_shards at least 1).
std::unique_ptr<reader::impl> new_reader_state(const std::string& spec, const reader_options& opts);
// What the source `src` opened for `spec` stands for: its name when it is a
// URL's source from the dispatcher, which names it by what it pinned (an
// hf:// URL at the commit read, which an index's shards then resolve
// against); else `spec` (paths, sources of reader_options::open).
std::string opened_spec(const reader::impl& r, const std::string& spec, const source& src);
// Makes `r` the checkpoint of one file: its source and parsed header.
void set_single_file(reader::impl& r, std::unique_ptr<source> src, shard_header h);

// The text of an index object in two steps (the read between them may be
// asynchronous): the prefix's bytes, then the caller reads rest() at
// rest_offset(). InvalidIndex when the object is larger than `limit`.
struct index_text {
    std::string text;
    std::size_t have = 0;
    std::uint64_t rest_offset() const noexcept { return have; }
    std::span<std::byte> rest() noexcept {
        return std::as_writable_bytes(std::span(text.data() + have, text.size() - have));
    }
};
index_text begin_index_text(const source& src, std::uint64_t limit);

// One shard as opened (in any way): its source and header, or the error.
struct opened_shard {
    std::string spec;
    std::unique_ptr<source> src;
    std::optional<shard_header> hdr;
    std::exception_ptr err;
};
// Opens the sources spec_of(0..n-1) and reads their headers, at most `limit`
// at once (on threads), except index `skip`, which the caller fills; errors stay in each opened_shard.
std::vector<opened_shard> open_all(const reader::impl& r, std::size_t n,
                                   const std::function<std::string(std::size_t)>& spec_of, std::size_t limit,
                                   std::size_t skip = std::size_t(-1));
// Throws the error that o.err holds with `context` in front (keeping its code and path).
[[noreturn]] void rethrow_failed(const opened_shard& o, const std::string& context);
// How many shard headers may be opened at once for a checkpoint named `spec`:
// a remote one 64 (an open is one round trip, nearly all of it waiting),
// local ones parallel_shards.
std::size_t parallel_opens(const reader::impl& r, const std::string& spec) noexcept;

// The parts of the split GGUF set whose part `h` was opened from `src` as
// `spec`, in split order (`spec` itself at `self`), from its name and split
// keys; no parts when it is not a part of a set of two or more, or when
// r.opts.gguf_split_set is off. InvalidIndex naming `src` when the keys are
// broken or the name does not say where the other parts are.
struct split_set {
    std::vector<std::string> parts;
    std::size_t self = 0;
};
split_set split_parts(const reader::impl& r, const std::string& spec, const source& src, const shard_header& h);
// Fills `r` from the parts of a split set, opened in split order: the first
// part's error (naming it), or llama.cpp's loader's checks (InvalidIndex):
// each part GGUF, its split.no its place, split.count and split.tensors.count
// agreeing, the tensors adding up, no name in two parts.
void adopt_split(reader::impl& r, const std::string& opened, std::vector<opened_shard> parts);
// Makes `r` the checkpoint of the file opened as r.spec: alone, or (a part of
// a split GGUF set, unless opts.gguf_split_set is off) with the other parts,
// opened here in parallel.
void open_file(reader::impl& r, std::unique_ptr<source> src, shard_header h);
// Opens the shards named by `index` (read from `index_spec`) in parallel and
// checks them against its weight_map; fills `r` (adopt_shards).
void open_shards(reader::impl& r, const std::string& index_spec, const shard_index& index);
// Fills `r` from the shards of `index`, opened in its shards order: the first
// shard's error (in that order) named with index and shard, or the checks
// against the weight_map (InvalidIndex), as open_shards reports them.
void adopt_shards(reader::impl& r, const std::string& index_spec, const shard_index& index,
                  std::vector<opened_shard> out);
// Runs a plan's ops on the reader's shards (see reader::execute).
void execute_plan(reader::impl& r, const read_plan& plan, const read_control& ctl);

}  // namespace read
}  // namespace ringsafe
