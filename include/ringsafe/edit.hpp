// Metadata edits of a local GGUF or safetensors file, in place when the file
// has room and the edit can be made crash-safe, else by one pass that writes a
// new file beside it and renames it over (the old file or the new one at the
// path, never a mix). A killed process (kill -9) leaves the old file or the
// new one; the fdatasync calls between the steps give the same after a crash
// of the machine on storage that does not tear a 512-byte sector.
//
// GGUF (gguf::edit). Tensor infos do not change in a metadata edit, so they
// stay where they are, at the end I of the key-value section [24, I); only
// that section and n_kv (bytes 16..24) are rewritten. The slack lives in the
// padding entry `ringsafe.padding` (a STRING of spaces, gguf_writer.hpp),
// which is either FIRST (layout A: its 36-byte entry header at 24, its spaces,
// then the real entries ending at I) or LAST (layout B: the real entries from
// 24, then the padding entry ending at I). An edit goes the other way:
//  * A -> B: the new entries and the new padding entry's header are written
//    into the old padding's spaces (bytes no reader interprets), all but their
//    first 36 bytes, which overlap the old padding's entry header; fdatasync;
//    COMMIT: one pwrite of bytes [16, 60) (n_kv and those 36 bytes); fdatasync.
//  * B -> A: the new entries are written at the back, [I - new, I), inside the
//    old padding's spaces; fdatasync; COMMIT: one pwrite of [16, 60) (n_kv
//    and the new padding entry's header at 24); fdatasync.
// A commit is a few dozen bytes inside the file's first page: the kernel
// copies a write page by page and stops only between pages for a fatal
// signal, so a killed process leaves all of it or none. Both ways need the
// old and the new entries to fit in [24, I) at once (old + new + 36 bytes);
// otherwise the file is rewritten. After a commit the new padding's string
// holds stale bytes (the old entries); they are overwritten with spaces
// (then fdatasync). Between the commit and that cleanup the file is valid for
// ggml and gguf-py (they do not check strings' UTF-8) but the padding string
// may not be UTF-8 (transformers decodes every string: it may refuse the file
// then). A kill during the writes before the commit leaves the old file's
// entries and tensors with non-space bytes inside its padding string.
// An edit whose changed bytes all lie inside one 4 KiB page with the layout
// kept (a same-size scalar, a string of the same length, a small change with
// the padding absorbing it) is one pwrite, with or without a padding entry.
// A rewrite puts the padding entry LAST with max(64 KiB, the entries' bytes)
// of spaces, so that later edits fit in place, and keeps the file's mode.
//
// safetensors (edit_safetensors): `__metadata__` string entries. The JSON
// header [8, 8 + N) is padded with spaces and N stays, so an edit is in place
// only when every byte that changes lies inside one 4 KiB-aligned page (one
// pwrite). Both ways write `__metadata__` LAST in the JSON object (the
// tensors in data order before it), so that a metadata edit changes only the
// header's tail. Otherwise a new file is written in one pass with 4 KiB of
// spaces of slack (at least) and renamed over the old one.
//
// Refused, the file untouched: a part of a split GGUF set, a file of neither
// format, a file without write permission (read-only mode bits, even for root),
// a missing key for a removal, a value its type cannot hold, a GGUF
// general.alignment other than the file's.
//
// Test hook (crash tests only): with RINGSAFE_EDIT_TEST_STALL set to
// "prewrite" (midway through the writes before the commit), "commit" (just
// before it), "cleanup" (after the commit, before the spaces) or "publish"
// (a rewrite, before its rename), the process prints "ringsafe edit: stalled
// at NAME" to stderr and waits to be killed.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ringsafe/gguf.hpp"

namespace ringsafe {

// One change of a file's metadata.
struct metadata_change {
    std::string key;
    // The new value as text (nullopt: remove the key; it must be there). GGUF:
    // parsed as `type`; safetensors: stored as it is.
    std::optional<std::string> value;
    // GGUF only: the value's type; nullopt keeps a replaced key's type and
    // gives a new key `new_key_type`. Arrays cannot be set. A BOOL is
    // "true"/"false"; integers and floats as C++'s stoll/stoull/stod read them.
    std::optional<gguf::value_type> type;
    gguf::value_type new_key_type = gguf::value_type::STRING;
};

// Which way an edit went.
enum class edit_way {
    unchanged,  // the metadata already said so: nothing written
    in_place,   // only header bytes rewritten, in place
    rewritten,  // a new file written in one pass and renamed over the old one
};
// "unchanged", "in place", "rewritten".
std::string_view edit_way_name(edit_way w) noexcept;

// What an edit did.
struct edit_result {
    edit_way way = edit_way::unchanged;
    // How, in words: "one write of 12 bytes", "padding first -> last", "no room: ...".
    std::string detail;
    std::uint64_t bytes_written = 0;  // bytes written to the file (a rewrite: the whole new file)
};

// How an edit runs.
struct edit_options {
    bool in_place = true;  // false: always rewrite (the one-pass path)
    bool sync = true;      // fdatasync between the steps (and fsync + directory sync of a rewrite)
};

namespace gguf {

// The entry `key` set to `text` parsed as `type` (not ARRAY): InvalidArgument
// naming the key when the text is not a value of the type or out of its range.
metadata_entry entry_from_text(const std::string& key, const std::string& text, value_type type);

// Applies `changes` in order to the metadata of the local GGUF file at `path`
// (the layouts and steps above). Throws ringsafe::error naming the path, key
// or offset, the file unchanged unless the error came from the disk itself.
edit_result edit(const std::string& path, std::span<const metadata_change> changes, const edit_options& opts = {});

}  // namespace gguf

// The same for the `__metadata__` of a local safetensors file (values are
// strings: `type` must be nullopt or STRING).
edit_result edit_safetensors(const std::string& path, std::span<const metadata_change> changes,
                             const edit_options& opts = {});

// gguf::edit or edit_safetensors, told by the file's first bytes (InvalidArgument
// for a file of neither format).
edit_result edit_file(const std::string& path, std::span<const metadata_change> changes,
                      const edit_options& opts = {});

}  // namespace ringsafe
