// Append mode: new tensors after an existing file's data, header rewritten in
// place inside its reserved padding.
//
// Order of a finish(), and what a crash leaves at each point:
//  1. new data is written past the old end, then fdatasync'd. Crash: old
//     header + old data intact + a tail the header does not describe; readers
//     refuse it (MetadataIncompleteBuffer); repair truncates the tail.
//  2. the header bytes that differ are written with one pwrite. When the
//     metadata is unchanged, the new JSON is the old JSON with its closing
//     `}` replaced by `,"new":{...}}`, so only that region changes: a torn
//     write leaves a mix that is never valid JSON (readers refuse it), and
//     repair finds the longest valid prefix (old, or old + the new entries
//     that landed whole, whose data is already durable from step 1).
//  3. fsync: the new file is durable.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>

#include "write/stream_writer.hpp"
#include "write/tensor_check.hpp"

namespace ringsafe {

using namespace write;

namespace write {
void (*append_step_hook)(append_step) = nullptr;
}

namespace {

void step(append_step s) {
    if (append_step_hook) append_step_hook(s);
}

// The data end a header claims (largest data_offsets end), or nullopt when
// the text is not a JSON object of tensor entries.
std::optional<std::uint64_t> claimed_data_end(std::string_view json) {
    boost::system::error_code ec;
    auto v = boost::json::parse(json, ec);
    if (ec || !v.is_object()) return std::nullopt;
    std::uint64_t end = 0;
    for (auto& [k, e] : v.as_object()) {
        if (k == "__metadata__") continue;
        auto* o = e.if_object();
        if (!o) return std::nullopt;
        auto* offs = o->if_contains("data_offsets");
        if (!offs || !offs->is_array() || offs->as_array().size() != 2) return std::nullopt;
        auto& b = offs->as_array()[1];
        if (b.is_uint64()) end = std::max(end, b.as_uint64());
        else if (b.is_int64() && b.as_int64() >= 0) end = std::max<std::uint64_t>(end, b.as_int64());
        else return std::nullopt;
    }
    return end;
}

// A header of N bytes that validates against a file of at most `file_size`
// bytes: first the header as it is (a tail beyond its data is dropped), then
// the longest prefix ending at an entry boundary.
std::optional<std::pair<std::string, header>> repaired(const std::string& json, std::uint64_t file_size) {
    auto attempt = [&](const std::string& text) -> std::optional<std::pair<std::string, header>> {
        auto end = claimed_data_end(text);
        if (!end || 8 + text.size() + *end > file_size) return std::nullopt;
        status st;
        auto h = parse_header(text, 8 + text.size() + *end, {}, st);
        if (!h) return std::nullopt;
        return std::pair{text, std::move(*h)};
    };
    if (auto r = attempt(json)) return r;
    for (std::size_t q = json.size(); q-- > 1;) {
        if (json[q] != ',' && json[q] != '}') continue;
        std::string cut = json.substr(0, q) + "}";
        cut.resize(json.size(), ' ');
        if (auto r = attempt(cut)) return r;
    }
    return std::nullopt;
}

std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) s.pop_back();
    return s;
}

}  // namespace

writer writer::open_append(const std::string& path, const append_options& opts) {
    auto p = std::make_unique<impl>();
    auto& s = *p;
    s.path = path;
    s.appending = true;
    s.append_opts = opts;
    s.append_fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (s.append_fd < 0) raise_errno(errno, "opening '" + path + "' to append");
    // From here on `p` owns the fd; an exception closes it via abandon_now (nothing written yet).
    struct stat st {};
    if (::fstat(s.append_fd, &st) != 0) raise_errno(errno, "stat of '" + path + "'");
    auto size = static_cast<std::uint64_t>(st.st_size);
    std::byte prefix[8] = {};
    auto got = ::pread(s.append_fd, prefix, 8, 0);
    if (got < 0) raise_errno(errno, "reading the header of '" + path + "'");
    std::uint64_t n = parse_length_prefix(std::span<const std::byte>(prefix, static_cast<std::size_t>(got)), size);
    std::string json(n, '\0');
    for (std::uint64_t done = 0; done < n;) {
        auto r = ::pread(s.append_fd, json.data() + done, n - done, static_cast<off_t>(8 + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) raise_errno(r < 0 ? errno : EIO, "reading the header of '" + path + "'");
        done += static_cast<std::uint64_t>(r);
    }
    status pst;
    auto h = parse_header(json, size, {}, pst);
    if (!h) {
        if (!opts.repair) raise(pst.code, "'" + path + "' cannot be appended to: " + pst.message);
        auto fixed = repaired(json, size);
        if (!fixed) raise(pst.code, "'" + path + "' cannot be repaired: " + pst.message);
        if (fixed->first != json) pwrite_all(s.append_fd, fixed->first.data(), n, 8, "repairing the header of '" + path + "'", path);
        json = fixed->first;
        h = std::move(fixed->second);
        if (::ftruncate(s.append_fd, static_cast<off_t>(h->file_size())) != 0 || ::fsync(s.append_fd) != 0)
            raise_errno(errno, "repairing '" + path + "'");
    }
    s.reserved = n;
    s.data_start = 8 + n;
    s.old_size = h->file_size();
    s.old_json = trimmed(json);
    s.old_metadata = h->metadata;
    for (auto& t : h->tensors) {
        s.old_entries.push_back({t.name, t.dtype, t.shape, t.begin, t.end});
        s.names.insert(t.name);
    }
    s.stats.header_reserved = n;
    stream_config cfg;
    cfg.block_size = opts.block_size;
    cfg.staging_blocks = opts.staging_blocks;
    cfg.depth = opts.queue_depth;
    cfg.path = path;
    impl* self = p.get();
    s.stream = std::make_unique<data_stream>(s.append_fd, s.old_size, cfg,
                                             [self](std::uint64_t off) { return self->describe_offset(off); });
    return writer(std::move(p));
}

void writer::impl::finish_append(const metadata_map* metadata) {
    std::uint64_t new_size = stream->flush();
    stats.staged_bytes = stream->staged_bytes();
    stats.zero_copy_bytes = stream->zero_copy_bytes();
    stats.staging_peak = stream->staging_peak();
    stream.reset();
    step(append_step::data_written);
    if (append_opts.sync && ::fdatasync(append_fd) != 0) raise_errno(errno, "fdatasync of '" + path + "'");
    step(append_step::data_synced);

    std::string json;
    bool same_meta = !metadata || (old_metadata && *metadata == *old_metadata);
    if (same_meta && !old_json.empty() && old_json.back() == '}') {
        // Keep the old text verbatim; only its closing brace and padding change.
        json = old_json.substr(0, old_json.size() - 1);
        std::string body = trimmed(json);
        bool empty_object = !body.empty() && body.back() == '{';
        for (auto& e : entries) {
            std::string one = trimmed(serialize_header(std::span<const tensor_entry>(&e, 1), nullptr));
            if (!empty_object) json += ',';
            json += one.substr(1, one.size() - 2);
            empty_object = false;
        }
        json += '}';
    } else {
        auto all = old_entries;
        all.insert(all.end(), entries.begin(), entries.end());
        json = serialize_header(all, metadata);
        json = trimmed(json);
    }
    if (json.size() > reserved)
        raise(errc::ReservationExceeded, "the header of '" + path + "' would need " + std::to_string(json.size()) +
                                             " bytes but the file reserves " + std::to_string(reserved));
    std::string padded = json;
    padded.resize(reserved, ' ');
    parse_header(padded, new_size);  // never write a header a reader would refuse

    // Write only the bytes that differ from the old header.
    std::string old_padded = old_json;
    old_padded.resize(reserved, ' ');
    std::size_t first = 0, last = reserved;
    while (first < last && padded[first] == old_padded[first]) ++first;
    while (last > first && padded[last - 1] == old_padded[last - 1]) --last;
    header_rewritten = true;
    if (last > first)
        pwrite_all(append_fd, padded.data() + first, last - first, 8 + first, "rewriting the header of '" + path + "'",
                   path);
    step(append_step::header_written);
    if (append_opts.sync && ::fsync(append_fd) != 0) raise_errno(errno, "fsync of '" + path + "'");
    step(append_step::header_synced);
    ::close(append_fd);
    append_fd = -1;
    stats.file_size = new_size;
    stats.header_reserved = reserved;
    stats.header_json = json.size();
}

}  // namespace ringsafe
