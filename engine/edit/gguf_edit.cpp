// gguf::edit (edit.hpp): a GGUF file's metadata changed in place, by one
// page-sized write or the padding entry's ping-pong between first and last,
// else by one rewrite that leaves a padding entry for later edits.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "edit/edit_file.hpp"
#include "ringsafe/edit.hpp"
#include "ringsafe/gguf_writer.hpp"
#include "write/gguf_entries.hpp"

namespace ringsafe::gguf {
namespace {

constexpr std::uint64_t kv_start = 24;                                     // after magic, version, the two counts
constexpr std::uint64_t pad_head = 8 + padding_key.size() + 4 + 8;         // key length, key, type, string length
constexpr std::uint64_t commit_end = kv_start + pad_head;                  // the commit write is [16, commit_end)
constexpr std::uint64_t min_rewrite_padding = 64u << 10;

// Bytes of one entry as stored.
std::uint64_t entry_bytes(const metadata_entry& e) {
    return 8 + e.key.size() + 4 + (e.is_array() ? 12 : 0) + e.data.size() +
           (e.element_type == value_type::STRING ? 8 * e.count : 0);
}

std::uint64_t entries_bytes(std::span<const metadata_entry> md) {
    std::uint64_t n = 0;
    for (const metadata_entry& e : md) n += entry_bytes(e);
    return n;
}

// Bytes [16, 24 + entries) of a file with these entries: n_kv, then the entries.
std::string counted_entries(std::span<const metadata_entry> md, std::uint32_t alignment, std::uint32_t version) {
    const std::string all = serialize(md, {}, alignment, version);
    return all.substr(16, 8 + entries_bytes(md));
}

// The header as far as the tensor infos' end, parsed, and its bytes.
struct parsed {
    header h;
    std::string bytes;  // [0, at least h.info_end)
};

parsed read_header(const edit::target& t) {
    parsed out;
    const std::uint64_t size = t.size();
    std::uint64_t want = std::min<std::uint64_t>(size, 1u << 20);
    if (size < 4) raise(errc::InvalidArgument, "'" + t.path() + "' is not a GGUF file (" + std::to_string(size) + " bytes)");
    parser p(size);
    for (;;) {
        const std::uint64_t have = out.bytes.size();
        out.bytes.resize(want);
        t.read(out.bytes.data() + have, want - have, have);
        if (have == 0 && !is_gguf(std::as_bytes(std::span(out.bytes.data(), 4))))
            raise(errc::InvalidArgument, "'" + t.path() + "' is not a GGUF file (no GGUF magic)");
        const progress pr = p.feed(std::as_bytes(std::span(out.bytes.data(), out.bytes.size())));
        if (pr.done) break;
        want = std::min<std::uint64_t>(size, std::max({pr.need, pr.estimate, 2 * want}));
    }
    out.h = p.finish();
    return out;
}

// The new real entries: the old ones but the padding, with `changes` applied.
std::vector<metadata_entry> apply(const header& h, std::span<const metadata_change> changes, const std::string& path) {
    std::vector<metadata_entry> md;
    for (const metadata_entry& e : h.metadata)
        if (e.key != padding_key) md.push_back(e);
    for (const metadata_change& c : changes) {
        if (c.key == padding_key)
            raise(errc::InvalidArgument, "key '" + c.key + "' is the edit's own padding: it cannot be changed");
        auto it = std::find_if(md.begin(), md.end(), [&](const metadata_entry& e) { return e.key == c.key; });
        if (!c.value) {
            if (it == md.end()) raise(errc::InvalidArgument, "removing key '" + c.key + "': '" + path + "' has no such key");
            md.erase(it);
            continue;
        }
        const value_type t = c.type ? *c.type : it != md.end() && !it->is_array() ? it->type : c.new_key_type;
        metadata_entry e = entry_from_text(c.key, *c.value, t);
        if (it == md.end()) md.push_back(std::move(e));
        else *it = std::move(e);
    }
    return md;
}

struct plan_input {
    const edit::target& t;
    const parsed& old;
    std::uint64_t info_start;  // I: where the tensor infos start (the KV section's end)
    std::size_t pad_index;     // the old padding entry's index; npos without one
    std::uint64_t old_real;    // bytes of the old real entries
    const std::vector<metadata_entry>& real;  // the new real entries
    std::uint64_t new_real;
};

// `real` with a padding entry that makes the KV section end at I, at `pos`; false when it does not fit.
bool with_padding(const plan_input& in, std::size_t pos, std::vector<metadata_entry>& out) {
    const std::uint64_t room = in.info_start - kv_start;
    if (in.new_real + pad_head > room) return false;
    out = in.real;
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(std::min(pos, out.size())),
               write::padding_entry(room - pad_head - in.new_real));
    return true;
}

// Spaces over the non-space bytes of the old file within [from, to) (the new padding's stale part).
std::uint64_t clean(const plan_input& in, std::uint64_t from, std::uint64_t to, bool sync) {
    const std::string& b = in.old.bytes;
    std::uint64_t lo = from, hi = to;
    while (lo < hi && b[lo] == ' ') ++lo;
    while (hi > lo && b[hi - 1] == ' ') --hi;
    if (lo == hi) return 0;
    const std::string spaces(hi - lo, ' ');
    in.t.write(spaces.data(), spaces.size(), lo, "writing spaces over the padding");
    in.t.sync(sync);
    return spaces.size();
}

// Writes new[from, to) (offsets in the file; `bytes` holds [16, I)) in two halves, stalling between them.
std::uint64_t prewrite(const plan_input& in, const std::string& bytes, std::uint64_t from, std::uint64_t to) {
    const std::uint64_t mid = from + (to - from) / 2;
    in.t.write(bytes.data() + (from - 16), mid - from, from, "writing the new metadata");
    edit::stall_point("prewrite");
    in.t.write(bytes.data() + (mid - 16), to - mid, mid, "writing the new metadata");
    return to - from;
}

void commit(const plan_input& in, const std::string& bytes, bool sync) {
    in.t.sync(sync);
    edit::stall_point("commit");
    in.t.write(bytes.data(), commit_end - 16, 16, "committing the new metadata (n_kv and the first entry)");
    in.t.sync(sync);
    edit::stall_point("cleanup");
}

edit_result edit_gguf(const std::string& path, std::span<const metadata_change> changes, const edit_options& opts) {
    const edit::target t(path);
    const parsed old = read_header(t);
    const header& h = old.h;
    if (h.split())
        raise(errc::InvalidArgument, "'" + path + "' is part of a split GGUF set (split.count " +
                                         std::to_string(h.split()->count) + "): edit a merged file instead");
    std::size_t pad_index = std::string::npos;
    for (std::size_t i = 0; i < h.metadata.size(); ++i)
        if (h.metadata[i].key == padding_key) pad_index = i;
    const std::vector<metadata_entry> real = write::stored_metadata(apply(h, changes, path), h.alignment);
    const std::uint64_t info_start = kv_start + entries_bytes(h.metadata);
    const plan_input in{t, old, info_start, pad_index,
                        entries_bytes(h.metadata) - (pad_index == std::string::npos ? 0 : entry_bytes(h.metadata[pad_index])),
                        real, entries_bytes(real)};
    const std::string_view old_bytes = std::string_view(old.bytes).substr(16, info_start - 16);
    const bool first = pad_index == 0;
    const bool last = pad_index != std::string::npos && pad_index + 1 == h.metadata.size();

    // 1. The layout kept: unchanged, or one write inside one page.
    std::vector<metadata_entry> same;
    bool fits = false;
    if (pad_index == std::string::npos) {
        fits = in.new_real == info_start - kv_start;
        same = real;
    } else {
        fits = with_padding(in, last && !first ? real.size() : pad_index, same);
    }
    if (fits) {
        const std::string now = counted_entries(same, h.alignment, h.version);
        if (now == old_bytes) return {edit_way::unchanged, "the metadata already says so", 0};
        const edit::changed_bytes c = edit::changed(old_bytes, now);
        const std::uint64_t a = 16 + c.lo, b = 16 + c.hi;
        // The padding's string spans [p0, p1): bytes no reader interprets (stale ones after a kill during a cleanup).
        std::uint64_t p0 = 0, p1 = 0;
        if (pad_index != std::string::npos) {
            const std::size_t at = last && !first ? real.size() : std::min(pad_index, real.size());
            p0 = kv_start + entries_bytes(std::span(same).first(at)) + pad_head;
            p1 = p0 + same[at].data.size();
        }
        if (opts.in_place && a >= p0 && b <= p1) {
            t.write(now.data() + c.lo, c.hi - c.lo, a, "writing spaces over the padding");
            t.sync(opts.sync);
            return {edit_way::in_place, "the metadata already says so; " + std::to_string(c.hi - c.lo) +
                                            " stale bytes of the padding made spaces", c.hi - c.lo};
        }
        if (opts.in_place)
            if (auto r = edit::commit_in_one_page(t, now, c, 16, opts.sync, "writing the new metadata")) return *r;
    }

    // 2. The padding entry from first to last or back, when the old and the new entries fit at once.
    const std::uint64_t room = info_start - kv_start;
    if (opts.in_place && (first || last) && in.old_real + in.new_real + pad_head <= room) {
        std::vector<metadata_entry> md;
        with_padding(in, first ? real.size() : 0, md);
        const std::string now = counted_entries(md, h.alignment, h.version);
        std::uint64_t written = 0;
        if (first) {  // A -> B: entries from 24 and the padding's header, into the old padding's spaces
            const std::uint64_t end = kv_start + in.new_real + pad_head;
            written += prewrite(in, now, commit_end, end);
            commit(in, now, opts.sync);
            written += commit_end - 16;
            written += clean(in, end, info_start, opts.sync);
            return {edit_way::in_place, "padding first -> last (" + std::to_string(written) + " bytes written)", written};
        }
        // B -> A: the entries at the back, the padding's header at 24
        const std::uint64_t begin = info_start - in.new_real;
        written += prewrite(in, now, begin, info_start);
        commit(in, now, opts.sync);
        written += commit_end - 16;
        written += clean(in, commit_end, begin, opts.sync);
        return {edit_way::in_place, "padding last -> first (" + std::to_string(written) + " bytes written)", written};
    }

    // 3. A new file: the padding entry last, with room for the next edits.
    std::vector<metadata_entry> md = real;
    const std::uint64_t spaces = std::max(min_rewrite_padding, in.new_real);
    md.push_back(write::padding_entry(spaces));
    const std::string head = serialize(md, records_of(h), h.alignment, h.version);
    const std::uint64_t n = edit::rewrite(t, head, h.data_offset, h.data_size, opts.sync);
    std::string why = !opts.in_place ? "asked to rewrite"
                      : pad_index == std::string::npos
                          ? "no padding entry"
                          : "no room in place (" + std::to_string(in.old_real + in.new_real + pad_head) +
                                " bytes needed, " + std::to_string(room) + " in the key-value section)";
    return {edit_way::rewritten, why + ": one pass, with " + std::to_string(spaces) + " bytes of padding for later edits",
            n};
}

}  // namespace

edit_result edit(const std::string& path, std::span<const metadata_change> changes, const edit_options& opts) {
    try {
        return edit_gguf(path, changes, opts);
    } catch (const error& e) {
        if (e.message().find("'" + path + "'") != std::string::npos) throw;
        throw error(e.code(), "editing '" + path + "': " + e.message(), e.path().empty() ? path : e.path());
    }
}

}  // namespace ringsafe::gguf
