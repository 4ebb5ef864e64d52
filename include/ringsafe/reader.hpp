// The reader: opens a safetensors checkpoint (a local file, a URL, or a sharded
// `*.index.json`), lists its tensors, and reads a selection of them, whole or
// sliced, into caller memory through the source's executor (io_uring or HTTP).
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
};

// One shard of the checkpoint (a single file is one shard).
struct shard_info {
    std::string spec;                       // resolved path or URL (hf://: pinned to the commit read)
    std::uint64_t size = 0;                 // object size in bytes
    std::uint64_t data_start = 0;           // 8 + N: source offset of the data section
    std::optional<metadata_map> metadata;   // the shard header's __metadata__
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
    // Opens `spec`: a path, an http(s)://, s3:// or hf:// URL, or a sharded index
    // (see looks_like_index()). Reads each header with the source's first read
    // (a second read only when the header is larger than that prefix), and
    // validates it like parse_header(). For an index, opens the shards in
    // parallel and checks that the weight_map is exactly the set of tensors
    // found in the shards (InvalidIndex naming the tensor and shards
    // otherwise); an hf:// index's shards are read at the commit the index
    // came from. Throws ringsafe::error naming the path/URL (and shard).
    static reader open(const std::string& spec, const reader_options& opts = {});
    // Non-throwing form: nullopt and `st` filled on failure.
    static std::optional<reader> open(const std::string& spec, const reader_options& opts,
                                      status& st) noexcept;
    // Uses an already opened source as a single-file checkpoint.
    static reader from_source(std::unique_ptr<source> src, const reader_options& opts = {});

    reader(reader&&) noexcept;
    reader& operator=(reader&&) noexcept;
    ~reader();

    // What was opened, as given: a signed URL keeps its signing values (show it with without_url_secrets).
    const std::string& spec() const noexcept;
    bool sharded() const noexcept;             // opened from an index

    // Every tensor: shard by shard (shards() order), in data order within a shard.
    // tensor_info offsets are relative to the tensor's shard's data section.
    std::span<const tensor_info> tensors() const noexcept;
    std::span<const shard_info> shards() const noexcept;
    std::uint32_t shard_of(std::uint32_t tensor) const noexcept;  // index into shards()
    // Lookup by exact name; nullopt/nullptr when absent. at() throws TensorNotFound naming it.
    std::optional<std::uint32_t> index_of(std::string_view name) const noexcept;
    const tensor_info* find(std::string_view name) const noexcept;
    const tensor_info& at(std::string_view name) const;
    // The single file's __metadata__; for an index, the __metadata__ entries
    // equal in every shard (the rest dropped; the index's own "metadata" never
    // appears). nullopt when absent or, for an index, when no entry is common.
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
    // Any mix of whole tensors, row ranges and boxes (see read_request).
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

}  // namespace ringsafe
