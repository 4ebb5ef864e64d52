// edit_safetensors (edit.hpp): `__metadata__` string entries changed in
// place when every changed byte lies in one 4 KiB page of the header, else by
// one rewrite; `__metadata__` written last in both.
#include <algorithm>
#include <string>
#include <vector>

#include "edit/edit_file.hpp"
#include "format/alignment.hpp"
#include "ringsafe/edit.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe {
namespace {

constexpr std::uint64_t rewrite_slack = 4096;

// The header's JSON, compact, tensors in `tensors`' order and `__metadata__` last.
std::string metadata_last_json(std::span<const tensor_entry> tensors, const metadata_map* md) {
    std::string json = serialize_header(tensors, nullptr);
    json.resize(serialized_json_size(tensors, nullptr));  // without the spaces
    if (!md) return json;
    std::string m = serialize_header({}, md);
    m.resize(serialized_json_size({}, md));  // {"__metadata__":{...}}
    if (tensors.empty()) return m;
    json.pop_back();  // the closing brace
    json += ',';
    json.append(m, 1);
    return json;
}

edit_result edit_st(const std::string& path, std::span<const metadata_change> changes, const edit_options& opts) {
    const edit::target t(path);
    std::byte prefix[8] = {};
    if (t.size() >= 8) t.read(prefix, 8, 0);
    const std::uint64_t n = parse_length_prefix(std::span<const std::byte>(prefix, t.size() >= 8 ? 8 : 0), t.size());
    std::string old(n, '\0');
    t.read(old.data(), n, 8);
    const header h = parse_header(old, t.size());
    metadata_map md = h.metadata.value_or(metadata_map{});
    bool any = h.metadata.has_value();
    for (const metadata_change& c : changes) {
        if (c.type && *c.type != gguf::value_type::STRING)
            raise(errc::InvalidArgument, "key '" + c.key + "': safetensors metadata values are strings, not " +
                                             std::string(gguf::value_type_name(*c.type)));
        if (!c.value) {
            if (!md.erase(c.key))
                raise(errc::InvalidArgument, "removing key '" + c.key + "': '" + path + "' has no such key");
            continue;
        }
        md[c.key] = *c.value;
        any = true;
    }
    std::vector<tensor_entry> entries;
    entries.reserve(h.tensors.size());
    for (const tensor_info& ti : h.tensors)
        entries.push_back({ti.name, ti.dtype, std::vector<std::uint64_t>(ti.shape.begin(), ti.shape.end()), ti.begin,
                           ti.end});
    const std::string json = metadata_last_json(entries, any ? &md : nullptr);
    if (json.size() <= n) {
        std::string now = json;
        now.resize(n, ' ');
        if (now == old) return {edit_way::unchanged, "the metadata already says so", 0};
        if (opts.in_place)
            if (auto r = edit::commit_in_one_page(t, now, edit::changed(old, now), 8, opts.sync,
                                                  "writing the new header"))
                return *r;
    }
    std::string head(8, '\0');
    std::string padded = json;
    padded.resize(format::align_up<std::uint64_t>(json.size() + rewrite_slack, 8), ' ');
    encode_length_prefix(padded.size(), reinterpret_cast<std::byte*>(head.data()));
    head += padded;
    const std::uint64_t written = edit::rewrite(t, head, 8 + n, h.data_size, opts.sync);
    const std::string why = !opts.in_place        ? "asked to rewrite"
                            : json.size() > n     ? "the header outgrew its " + std::to_string(n) + " bytes"
                                                  : "the changed bytes span more than one 4 KiB page";
    return {edit_way::rewritten,
            why + ": one pass, __metadata__ last, with " + std::to_string(padded.size() - json.size()) +
                " bytes of spaces for later edits",
            written};
}

}  // namespace

edit_result edit_safetensors(const std::string& path, std::span<const metadata_change> changes,
                             const edit_options& opts) {
    try {
        return edit_st(path, changes, opts);
    } catch (const error& e) {
        if (e.message().find("'" + path + "'") != std::string::npos) throw;
        throw error(e.code(), "editing '" + path + "': " + e.message(), e.path().empty() ? path : e.path());
    }
}

}  // namespace ringsafe
