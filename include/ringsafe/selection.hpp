// Choosing tensors: fnmatch-style glob patterns and the selection type that
// reader::select*() returns.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace ringsafe {

// True when `name` matches the glob `pattern` as a whole. The syntax is
// fnmatch(3) without flags (no FNM_PATHNAME, no FNM_PERIOD), on UTF-8 code points:
//   `*` any run of characters (also `.` and `/`), `?` exactly one character,
//   `[abc]`, `[a-z]` one character of a set, `[!a-z]` or `[^a-z]` one not in it
//   (a `]` right after `[`, `[!` or `[^` is literal), `\c` the character c itself.
// A `[` without a closing `]` matches a literal `[`. Bytes that are not valid
// UTF-8 count as one character each. Runs in O(|pattern| x |name|) worst case.
bool glob_match(std::string_view pattern, std::string_view name) noexcept;

// True when `pattern` contains a glob metacharacter (`*`, `?`, `[` or `\`).
bool is_glob(std::string_view pattern) noexcept;

// A set of tensors of one reader, as indices into reader::tensors(). Built by
// reader::select(), select_glob(), select_if() and all(); only valid with the
// reader that made it (reader methods refuse another reader's selection with
// InvalidArgument). The order is the order in which per-tensor destinations
// and packed placements are given: the caller's order for exact names, data
// order (shard by shard) otherwise.
class selection {
public:
    selection() = default;

    std::span<const std::uint32_t> indices() const noexcept { return indices_; }
    std::size_t size() const noexcept { return indices_.size(); }
    bool empty() const noexcept { return indices_.empty(); }
    std::uint64_t bytes() const noexcept { return bytes_; }  // sum of the tensors' sizes
    std::uint64_t reader_id() const noexcept { return reader_id_; }

private:
    friend class reader;
    selection(std::uint64_t reader_id, std::vector<std::uint32_t> indices, std::uint64_t bytes)
        : indices_(std::move(indices)), bytes_(bytes), reader_id_(reader_id) {}
    std::vector<std::uint32_t> indices_;
    std::uint64_t bytes_ = 0;
    std::uint64_t reader_id_ = 0;
};

}  // namespace ringsafe
