// The streaming GGUF writer (gguf::writer, see gguf_writer.hpp): header space
// reserved, data streamed behind it, the header backfilled with a padding
// entry holding the slack; one relocation when the reservation runs out.
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "file/temp_file.hpp"
#include "format/alignment.hpp"
#include "write/abandon_on_error.hpp"
#include "write/data_stream.hpp"
#include "write/gguf_entries.hpp"
#include "write/stream_writer.hpp"
#include "write/tensor_check.hpp"

namespace ringsafe::gguf {

using write::describe_tensor;

namespace {
constexpr std::uint64_t page = 4096;
// A padding entry's bytes besides its spaces: key length, key, type, string length.
const std::uint64_t padding_overhead = 8 + padding_key.size() + 4 + 8;
}  // namespace

struct writer::impl {
    std::string path;
    writer_options opts;
    writer_stats stats;
    std::vector<metadata_entry> metadata;
    std::unique_ptr<file::temp_file> tmp;
    std::unique_ptr<write::data_stream> stream;
    std::vector<tensor_record> records;
    std::vector<std::uint64_t> begins;  // data-relative offset of each record
    std::unordered_set<std::string> names;
    std::uint64_t data_start = 0;  // the reservation: the data section's offset
    bool open = false, finished = false, dead = false;
    std::uint64_t open_expected = 0, open_received = 0;

    std::uint64_t start_alignment() const { return std::max<std::uint64_t>(page, opts.alignment); }

    std::string describe_offset(std::uint64_t file_offset) const {
        if (file_offset < data_start || begins.empty()) return "the data section";
        const std::uint64_t rel = file_offset - data_start;
        auto it = std::upper_bound(begins.begin(), begins.end(), rel);
        if (it == begins.begin()) return "the data section";
        const std::size_t i = static_cast<std::size_t>(it - begins.begin()) - 1;
        return describe_tensor(records[i].name) + " at byte " + std::to_string(rel - begins[i]) + " of it";
    }
    void abandon_now() noexcept {
        if (finished || dead) return;
        dead = true;
        stream.reset();  // waits for in-flight writes
        if (tmp) tmp->discard();
    }
    void check_usable(const std::string& what) const {
        if (finished || dead) raise(errc::WriterState, what + " on a finished or abandoned GGUF writer for '" + path + "'");
    }
    void put(std::span<const std::byte> bytes) {
        if (!open) raise(errc::WriterState, "append() without begin()");
        if (bytes.size() > open_expected - open_received)
            raise(errc::InvalidArgument, describe_tensor(records.back().name) + ": " +
                                             std::to_string(open_received + bytes.size()) +
                                             " bytes given, its type and ne need " + std::to_string(open_expected));
        write::abandon_on_error(*this, [&] { stream->put_copy(bytes); });
        open_received += bytes.size();
        stats.data_bytes += bytes.size();
    }
    void pad_data() {
        static const std::array<std::byte, 4096> zeros{};
        std::uint64_t pos = stream->position() - data_start;
        std::uint64_t left = format::align_up<std::uint64_t>(pos, opts.alignment) - pos;
        write::abandon_on_error(*this, [&] {
            while (left) {
                const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, zeros.size()));
                stream->put_copy(std::span(zeros.data(), n));
                left -= n;
            }
        });
    }
    void finish_now(const std::vector<metadata_entry>& md);
};

writer::writer(const std::string& path, std::vector<metadata_entry> metadata, const writer_options& opts)
    : impl_(std::make_unique<impl>()) {
    auto& s = *impl_;
    s.path = path;
    s.opts = opts;
    if (opts.block_size == 0 || opts.block_size % page)
        raise(errc::InvalidArgument, "gguf::writer_options::block_size must be a non-zero multiple of 4096");
    s.metadata = write::stored_metadata(std::move(metadata), opts.alignment);
    std::uint64_t want = opts.reserve_bytes;
    if (!want)
        want = write::unpadded_size(s.metadata, {}, opts.alignment) + padding_overhead +
               opts.expected_tensors * (opts.expected_name_length + 72) + opts.expected_metadata_bytes;
    s.data_start = format::align_up<std::uint64_t>(std::max<std::uint64_t>(want, 1), s.start_alignment());
    s.tmp = std::make_unique<file::temp_file>(path, opts.direct);
    s.stats.direct = s.tmp->direct();
    impl* self = impl_.get();
    s.stream = write::open_data_stream(*s.tmp, s.data_start, opts.block_size, opts.staging_blocks, opts.queue_depth,
                                       path, [self](std::uint64_t off) { return self->describe_offset(off); });
}

writer::~writer() {
    if (impl_) impl_->abandon_now();
}
writer::writer(writer&&) noexcept = default;
writer& writer::operator=(writer&& o) noexcept {
    if (this != &o) {
        if (impl_) impl_->abandon_now();
        impl_ = std::move(o.impl_);
    }
    return *this;
}

void writer::begin(const tensor_record& t) {
    auto& s = *impl_;
    s.check_usable("adding " + describe_tensor(t.name));
    if (s.open)
        raise(errc::WriterState, "adding " + describe_tensor(t.name) + " while " +
                                     describe_tensor(s.records.back().name) + " is not ended");
    const std::uint64_t bytes = tensor_bytes(t);
    if (s.names.count(t.name)) raise(errc::DuplicateTensor, "duplicate tensor name '" + t.name + "'");
    s.names.insert(t.name);
    s.records.push_back(t);
    s.begins.push_back(s.stream->position() - s.data_start);
    s.open = true;
    s.open_expected = bytes;
    s.open_received = 0;
}

void writer::append(std::span<const std::byte> bytes) { impl_->put(bytes); }

void writer::end() {
    auto& s = *impl_;
    if (!s.open) raise(errc::WriterState, "end() without begin()");
    if (s.open_received != s.open_expected)
        raise(errc::WriterState, describe_tensor(s.records.back().name) + " ended after " +
                                     std::to_string(s.open_received) + " of its " + std::to_string(s.open_expected) +
                                     " bytes");
    s.pad_data();
    s.open = false;
    ++s.stats.tensors;
}

void writer::add(const tensor_record& t, std::span<const std::byte> bytes) {
    auto& s = *impl_;
    if (!s.open && !s.finished && !s.dead) {
        const std::uint64_t need = tensor_bytes(t);
        if (need != bytes.size())
            raise(errc::InvalidArgument, describe_tensor(t.name) + ": " + std::to_string(bytes.size()) +
                                             " bytes given, its type and ne need " + std::to_string(need));
    }
    begin(t);
    append(bytes);
    end();
}

void writer::impl::finish_now(const std::vector<metadata_entry>& md) {
    const std::uint64_t logical_end = stream->position();
    stream->flush();
    stats.staged_bytes = stream->staged_bytes();
    stats.staging_peak = stream->staging_peak();
    stream.reset();
    if (tmp->direct() && ::ftruncate(tmp->fd(), static_cast<off_t>(logical_end)) != 0)
        raise_errno(errno, "truncating '" + path + "' to " + std::to_string(logical_end) + " bytes", path);
    const std::uint64_t data_size = logical_end - data_start;
    std::vector<metadata_entry> entries = md;
    entries.push_back(write::padding_entry(0));
    const std::uint64_t bare = write::unpadded_size(entries, records, opts.alignment);
    stats.header_json = bare;
    if (bare > data_start) {
        if (opts.strict_reservation)
            raise(errc::ReservationExceeded, "the GGUF header of '" + path + "' needs " + std::to_string(bare) +
                                                 " bytes but " + std::to_string(data_start) +
                                                 " were reserved (strict_reservation)");
        const std::uint64_t new_start = format::align_up<std::uint64_t>(bare, start_alignment());
        if (data_size) {
            stats.relocation =
                write::relocate_data(*tmp, path, data_start, new_start, data_size, opts.relocate_in_place);
            if (stats.relocation == "copy_file_range") stats.relocated_bytes = data_size;
        }
        data_start = new_start;
    }
    entries.back() = write::padding_entry(data_start - bare);
    const std::string header = serialize(entries, records, opts.alignment);
    if (header.size() != data_start)
        raise(errc::InvalidArgument, "the GGUF header of '" + path + "' came out " + std::to_string(header.size()) +
                                         " bytes, not the " + std::to_string(data_start) + " reserved");
    // An aligned copy: the file may be open with O_DIRECT (data_start is a multiple of 4096).
    std::unique_ptr<void, void (*)(void*)> block(std::aligned_alloc(page, header.size()), std::free);
    if (!block) raise_errno(ENOMEM, "allocating the GGUF header block of '" + path + "'");
    std::memcpy(block.get(), header.data(), header.size());
    write::pwrite_all(tmp->fd(), block.get(), header.size(), 0, "writing the GGUF header of '" + path + "'", path);
    stats.header_reserved = data_start;
    stats.file_size = data_start + data_size;
    tmp->publish(opts.sync, opts.sync_dir);
}

void writer::finish(const std::vector<metadata_entry>* metadata) {
    auto& s = *impl_;
    s.check_usable("finish()");
    if (s.open)
        raise(errc::WriterState, "finish() while " + describe_tensor(s.records.back().name) + " is not ended (" +
                                     std::to_string(s.open_received) + " of " + std::to_string(s.open_expected) +
                                     " bytes)");
    std::vector<metadata_entry> md = metadata ? write::stored_metadata(*metadata, s.opts.alignment) : s.metadata;
    write::abandon_on_error(s, [&] { s.finish_now(md); });
    s.finished = true;
}

void writer::abandon() noexcept {
    if (impl_) impl_->abandon_now();
}

const writer_stats& writer::stats() const noexcept { return impl_->stats; }

}  // namespace ringsafe::gguf
