// The reader: opens a checkpoint (a safetensors or GGUF file, by path or URL; a
// sharded `*.index.json`; a split GGUF set), lists its tensors, and reads a
// selection of them, whole or sliced, into caller memory through the source's
// executor (io_uring or HTTP). A file's format is told by its first bytes.
//
//   auto r = ringsafe::reader::open("model.safetensors");
//   auto sel = r.select_glob("model.layers.*.mlp.*");
//   std::vector<std::byte> arena(r.packed_size(sel));
//   auto placed = r.read_packed(sel, arena);   // offsets of each tensor in arena
//
// Caller buffers are never owned: they must stay valid until the read (or the
// execution of a plan) returns, and are written only within the sizes asked for.
// Every size is checked before any I/O is issued.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ringsafe/error.hpp"
#include "ringsafe/gguf.hpp"
#include "ringsafe/header.hpp"
#include "ringsafe/open_source.hpp"
#include "ringsafe/plan.hpp"
#include "ringsafe/selection.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe {

namespace detail {
struct reader_access;  // engine-internal (engine/asio/reader_access.hpp)
}

// How a reader opens, plans and reads. Defaults are those of the parts.
struct reader_options {
    source_options source;  // file (queue depth, chunk, threads, O_DIRECT) and HTTP options
    parse_options parse;    // header limits
    plan_options plan;      // chunking and coalescing
    unsigned parallel_shards = 4;  // shards opened, and read, at the same time (at least 1; a remote index opens up to 64 at once)
    // Opens each path or URL the reader needs (the spec, then the shards).
    // Empty (the default) = open_source(spec, source). Lets callers plug in
    // their own source kinds.
    std::function<std::unique_ptr<ringsafe::source>(const std::string& spec)> open;
    // A part of a split GGUF set (`NAME-00002-of-00003.gguf` with split.* keys)
    // opens the whole set; false: only the file named.
    bool gguf_split_set = true;
};

// The format of a shard, told by its first bytes ("GGUF": GGUF, else safetensors).
enum class file_format : std::uint8_t { safetensors, gguf };

// One shard of the checkpoint (a single file is one shard).
struct shard_info {
    std::string spec;                       // resolved path or URL (hf://: pinned to the commit read)
    std::uint64_t size = 0;                 // object size in bytes
    ringsafe::file_format format = file_format::safetensors;
    std::uint64_t data_start = 0;           // source offset of the data section (safetensors: 8 + N; GGUF: data_offset)
    std::optional<metadata_map> metadata;   // the shard header's __metadata__ (safetensors)
    // A GGUF shard's header: version, alignment, data_offset, metadata entries
    // and split keys; its tensors are in the reader's table (tensors() of this
    // shard), not here. Null for safetensors.
    std::shared_ptr<const gguf::header> gguf;
    std::uint32_t first_tensor = 0;         // its tensors are tensors()[first_tensor, +tensor_count)
    std::uint32_t tensor_count = 0;
    std::uint64_t device = 0, inode = 0;    // a local shard's identity as opened (st_dev, st_ino); else 0
    std::int64_t mtime_ns = 0;              // a local shard's st_mtim (ns) as opened: a rewrite in place changes it; else 0
    // The local file a shard is read from: the path, or for an hf:// shard found in
    // the Hub cache that cache's file; empty for a shard read over the network.
    std::string file;
};

// An open checkpoint. Movable, not copyable. Listing and planning are const
// and thread-safe; execute() may be called from several threads (executions
// are serialized per shard). Plans and selections belong to the reader that
// made them.
class reader {
public:
    // Opens `spec`: a path, a URL (see is_url), or a
    // sharded index (see looks_like_index()). Reads each header with the
    // source's first read (safetensors: a second read only when the header is
    // larger than that prefix; GGUF: the rest in as few reads as its parser's
    // estimate allows, each one request), and validates it like parse_header()
    // or gguf::parse(). A part of a split GGUF set opens every part, in
    // parallel, as one reader (shards in split order), with llama.cpp's checks:
    // every part present (a missing one is the error of opening it, naming
    // it), its split.no its place, split.count and split.tensors.count the
    // same in each and the tensors adding up, no tensor name twice
    // (InvalidIndex naming the part otherwise). For an index, opens the shards in
    // parallel and checks that the weight_map is exactly the set of tensors
    // found in the shards (InvalidIndex naming the tensor and shards
    // otherwise); an hf:// index's shards are read at the commit the index
    // came from. Throws ringsafe::error naming the path/URL (and shard).
    static reader open(const std::string& spec, const reader_options& opts = {});
    // Non-throwing form: nullopt and `st` filled on failure.
    static std::optional<reader> open(const std::string& spec, const reader_options& opts,
                                      status& st) noexcept;
    // Uses an already opened source as a single-file checkpoint (a GGUF part alone).
    static reader from_source(std::unique_ptr<source> src, const reader_options& opts = {});

    reader(reader&&) noexcept;
    reader& operator=(reader&&) noexcept;
    ~reader();

    // What was opened, as given: a signed URL keeps its signing values (show it with without_url_secrets).
    const std::string& spec() const noexcept;
    bool sharded() const noexcept;             // opened from an index, or a split GGUF set

    // Every tensor: shard by shard (shards() order), in data order within a shard.
    // tensor_info offsets are relative to the tensor's shard's data section.
    std::span<const tensor_info> tensors() const noexcept;
    std::span<const shard_info> shards() const noexcept;
    // The checkpoint's format (that of its shards).
    file_format format() const noexcept;
    // A GGUF checkpoint's header (its first part's, which holds a split
    // model's metadata; tensors are in tensors()); nullptr for safetensors.
    const gguf::header* gguf() const noexcept;
    std::uint32_t shard_of(std::uint32_t tensor) const noexcept;  // index into shards()
    // Lookup by exact name; nullopt/nullptr when absent. at() throws TensorNotFound naming it.
    std::optional<std::uint32_t> index_of(std::string_view name) const noexcept;
    const tensor_info* find(std::string_view name) const noexcept;
    const tensor_info& at(std::string_view name) const;
    // The single file's __metadata__; for an index, the __metadata__ entries
    // equal in every shard (the rest dropped; the index's own "metadata" never
    // appears). nullopt when absent or, for an index, when no entry is common;
    // always for GGUF, whose metadata is gguf()->metadata.
    const std::optional<metadata_map>& metadata() const noexcept;
    std::uint64_t total_bytes() const noexcept;  // sum of all tensor sizes

    // Selections. select(): exact names in the caller's order; TensorNotFound
    // naming the first missing one; InvalidArgument for a name given twice.
    // select_glob(): tensors matching any pattern (glob_match), data order; a
    // pattern matching nothing is not an error. select_if(): a predicate.
    selection all() const;
    selection select(const std::vector<std::string>& names) const;
    selection select_glob(const std::vector<std::string>& patterns) const;
    selection select_glob(std::string_view pattern) const;
    selection select_if(const std::function<bool(const tensor_info&)>& pred) const;
    // Tensors by index into tensors(), in the given order (e.g. a part of a
    // selection, to read millions of tensors in batches). InvalidArgument for
    // an index out of range or given twice.
    selection select_indices(std::span<const std::uint32_t> indices) const;

    // Bytes a box of a tensor occupies when packed (see read_request::box).
    // InvalidArgument when the box is out of the shape or, for sub-byte dtypes,
    // when a contiguous run would not start and end on a byte boundary.
    std::uint64_t box_bytes(std::string_view tensor, std::span<const dim_range> box) const;
    // Arena size plan_packed() needs: each tensor's offset rounded up to `alignment`
    // (a power of two; InvalidArgument otherwise).
    std::uint64_t packed_size(const selection& sel, std::uint64_t alignment = 64) const;

    // Plans. None issues I/O; all validate every size first.
    // One buffer per selected tensor, in selection order (dsts.size() must equal
    // sel.size(); BufferTooSmall names the tensor, its size and the buffer's;
    // InvalidArgument when two destinations overlap). Larger buffers are fine:
    // only the tensor's size is written.
    read_plan plan(const selection& sel, std::span<const std::span<std::byte>> dsts) const;
    // The selection packed into one caller arena (placements() says where).
    read_plan plan_packed(const selection& sel, std::span<std::byte> arena,
                          std::uint64_t alignment = 64) const;
    // Any mix of whole tensors, row ranges and boxes (see read_request). A
    // tensor of a GGUF block type (tensor_info::quantized()) is read whole or
    // by byte window only: a box of it is InvalidArgument naming it and its type.
    read_plan plan(std::span<const read_request> requests) const;

    // Runs a plan: every op of every shard, shards concurrently (at most
    // parallel_shards). Re-runnable. Throws ringsafe::error: InvalidArgument for
    // another reader's plan, Cancelled, Truncated (the object shrank), or the
    // executor's error naming the source, offset and tensor. On failure the
    // destinations may hold partial data, and no I/O is in flight on return.
    void execute(const read_plan& plan, const read_control& ctl = {});
    bool execute(const read_plan& plan, const read_control& ctl, status& st) noexcept;

    // One-shot conveniences: plan + execute.
    void read(const selection& sel, std::span<const std::span<std::byte>> dsts,
              const read_control& ctl = {});
    std::vector<placement> read_packed(const selection& sel, std::span<std::byte> arena,
                                       std::uint64_t alignment = 64, const read_control& ctl = {});
    // Rows [begin, end) of dimension 0 into `dst` (one contiguous range).
    void read_rows(std::string_view tensor, std::uint64_t begin, std::uint64_t end,
                   std::span<std::byte> dst, const read_control& ctl = {});
    // An N-d box into `dst`, packed row-major, with the fewest byte ranges.
    void read_box(std::string_view tensor, std::span<const dim_range> box,
                  std::span<std::byte> dst, const read_control& ctl = {});

    struct impl;

private:
    friend struct detail::reader_access;
    explicit reader(std::unique_ptr<impl> p);
    std::unique_ptr<impl> p_;
};

// The path or URL of `shard` next to the index `index_spec`: the index's
// directory (or, for a URL, its path without query or fragment) joined with
// the shard's relative name.
std::string resolve_shard(const std::string& index_spec, const std::string& shard);

// True when an object looks like an index rather than a safetensors file:
// its name ends in ".json", or it starts with optional JSON whitespace and '{'
// while its first 8 bytes, read as a safetensors length prefix, point past
// `size` (a real file's prefix never does).
bool looks_like_index(std::string_view spec, std::span<const std::byte> prefix,
                      std::uint64_t size) noexcept;

}  // namespace ringsafe
