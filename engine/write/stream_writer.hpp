// State of a streaming writer (ringsafe::writer::impl), shared by the files
// that implement its modes: writer.cpp (new files), append_mode.cpp (append),
// relocate.cpp (reservation overflow), publish.cpp (finish of a new file).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "file/temp_file.hpp"
#include "ringsafe/writer.hpp"
#include "write/abandon_on_error.hpp"
#include "write/data_stream.hpp"

namespace ringsafe {

struct writer::impl {
    std::string path;
    writer_options opts;
    writer_stats stats;
    std::unique_ptr<file::temp_file> tmp;         // new files
    int append_fd = -1;                            // append mode: the file itself
    std::unique_ptr<write::data_stream> stream;
    std::vector<tensor_entry> entries;  // tensors written by this writer, in data order
    std::unordered_set<std::string> names;
    std::uint64_t data_start = 0;       // 8 + N
    std::uint64_t reserved = 0;         // N

    // The tensor between begin() and end().
    bool open = false;
    std::uint64_t open_expected = 0, open_received = 0;

    bool finished = false, dead = false;

    // Append mode.
    bool appending = false;
    append_options append_opts;
    std::uint64_t old_size = 0;          // file size before the append
    std::string old_json;                // the header's JSON, trailing spaces trimmed
    std::optional<metadata_map> old_metadata;
    std::vector<tensor_entry> old_entries;
    bool header_rewritten = false;       // the old header bytes were overwritten

    int fd() const noexcept { return appending ? append_fd : tmp->fd(); }
    std::string describe_offset(std::uint64_t file_offset) const;
    void abandon_now() noexcept;
    void start_tensor(std::string_view name, dtype t, const std::vector<std::uint64_t>& shape);
    // add()'s checks and start: the size must match shape x dtype. No I/O.
    void begin_add(std::string_view name, dtype t, const std::vector<std::uint64_t>& shape, std::uint64_t size);
    void check_put(std::uint64_t size) const;  // open tensor, room for `size` more bytes
    void put(std::span<const std::byte> bytes, std::shared_ptr<const void> keep);
    // Copies what fits into free staging without waiting (the async writer);
    // returns the count. Throws on an earlier write error without abandoning.
    std::size_t put_ready(std::span<const std::byte> bytes);
    void end_tensor();
    // finish()'s checks before any I/O (state, open tensor, metadata).
    void check_finishable(const metadata_map* metadata) const;
    void finish_new(const metadata_map* metadata);
    // The steps of finish_new after the data is flushed, shared with the async
    // writer: seal() records the stats, checks the header size, cuts the
    // O_DIRECT padding (ftruncate) and says whether relocate() must run;
    // header_bytes() is the header block to write at offset 0 (8 + N bytes);
    // published_sizes() fills the stats once it is written.
    bool seal(const metadata_map* metadata, std::uint64_t logical_end);
    std::string header_text(const metadata_map* metadata) const;
    void published_sizes();
    std::uint64_t sealed_json = 0, sealed_data = 0;  // set by seal()
    void finish_append(const metadata_map* metadata);
    // Moves the data so that a header of `json_size` bytes fits (reservation overflow).
    void relocate(std::uint64_t json_size, std::uint64_t data_end);
};

namespace write {
// Test hook for crash tests: called by an append's finish() at each step
// boundary (see append_step). Null in production.
enum class append_step { data_written = 1, data_synced, header_written, header_synced };
extern void (*append_step_hook)(append_step);
// Writes all of `data` at `offset` with pwrite (retrying short writes and EINTR); throws naming
// `what`, with `path` (the file written) as the error's error::path().
void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::string& what,
                const std::string& path);
// The data stream of a new file's temporary `tmp` from file offset `start`:
// writes of `block_size` bytes (O_DIRECT when tmp is), `staging_blocks` of
// staging, `depth` in flight; `describe` names what lives at a file offset.
std::unique_ptr<data_stream> open_data_stream(const file::temp_file& tmp, std::uint64_t start, std::uint64_t block_size,
                                              unsigned staging_blocks, unsigned depth, const std::string& path,
                                              std::function<std::string(std::uint64_t)> describe);
// Moves the data section [data_start, data_start + data_size) of `tmp` to
// `new_start` (new_start - data_start a multiple of 4096), once, in the
// kernel: FALLOC_FL_INSERT_RANGE when `in_place` and the filesystem allows
// it, else copy_file_range into a new temporary that `tmp` adopts. Returns
// "insert_range" or "copy_file_range"; throws naming `path`.
std::string relocate_data(file::temp_file& tmp, const std::string& path, std::uint64_t data_start,
                          std::uint64_t new_start, std::uint64_t data_size, bool in_place);
// Builds the 8-byte prefix + the header padded to exactly n bytes, in an
// aligned buffer of 8 + n bytes (suitable for O_DIRECT when 8 + n is aligned).
std::unique_ptr<std::byte, void (*)(void*)> header_block(const std::string& json_padded);
}  // namespace write

}  // namespace ringsafe
