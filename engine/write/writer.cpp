// The streaming writer for new files (ringsafe::writer, see writer.hpp).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "format/alignment.hpp"
#include "write/stream_writer.hpp"
#include "write/tensor_check.hpp"

namespace ringsafe {

using namespace write;
using file::temp_file;

namespace {
constexpr std::uint64_t page = 4096;
}  // namespace

std::uint64_t reservation_for(std::uint64_t tensors, std::uint64_t name_length,
                              std::uint64_t metadata_bytes) noexcept {
    // 160 bytes cover an entry's fixed text: quotes, dtype, a 4-d shape of
    // 6-digit dims, and two 12-digit offsets, with room to spare.
    std::uint64_t json = tensors * (name_length + 160) + metadata_bytes + 64;
    return format::align_up(8 + json, page) - 8;
}

namespace write {

void pwrite_all(int fd, const void* data, std::size_t size, std::uint64_t offset, const std::string& what,
                const std::string& path) {
    auto* p = static_cast<const char*>(data);
    while (size) {
        ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
        if (n < 0) {
            if (errno == EINTR) continue;
            raise_errno(errno, what + " (file offset " + std::to_string(offset) + ")", path);
        }
        if (n == 0) raise(errc::IoError, what + ": no progress at file offset " + std::to_string(offset));
        p += n, size -= static_cast<std::size_t>(n), offset += static_cast<std::uint64_t>(n);
    }
}

std::unique_ptr<data_stream> open_data_stream(const file::temp_file& tmp, std::uint64_t start, std::uint64_t block_size,
                                              unsigned staging_blocks, unsigned depth, const std::string& path,
                                              std::function<std::string(std::uint64_t)> describe) {
    stream_config cfg;
    cfg.direct = tmp.direct();
    cfg.block_size = block_size;
    cfg.staging_blocks = staging_blocks;
    cfg.depth = depth;
    cfg.path = path;
    return std::make_unique<data_stream>(tmp.fd(), start, cfg, std::move(describe));
}

std::unique_ptr<std::byte, void (*)(void*)> header_block(const std::string& json_padded) {
    std::uint64_t total = 8 + json_padded.size();
    void* mem = std::aligned_alloc(page, format::align_up<std::uint64_t>(total, page));
    if (!mem) raise_errno(ENOMEM, "allocating the header block");
    auto* b = static_cast<std::byte*>(mem);
    encode_length_prefix(json_padded.size(), b);
    std::memcpy(b + 8, json_padded.data(), json_padded.size());
    return {b, std::free};
}

}  // namespace write

std::string writer::impl::describe_offset(std::uint64_t file_offset) const {
    if (file_offset < data_start || entries.empty()) return "the data section";
    std::uint64_t rel = file_offset - data_start;
    auto it = std::upper_bound(entries.begin(), entries.end(), rel,
                               [](std::uint64_t v, const tensor_entry& e) { return v < e.begin; });
    if (it == entries.begin()) return "the data section";
    --it;
    return describe_tensor(it->name) + " at byte " + std::to_string(rel - it->begin) + " of it";
}

void writer::impl::abandon_now() noexcept {
    if (finished || dead) return;
    dead = true;
    stream.reset();  // waits for in-flight writes
    if (appending) {
        // Cut the new data away: the file is back to its old, valid self.
        if (append_fd >= 0) {
            if (header_rewritten) {  // put the old header back before cutting the data it would need
                std::string old_padded = old_json;
                old_padded.resize(reserved, ' ');
                try {
                    pwrite_all(append_fd, old_padded.data(), old_padded.size(), 8, "restoring the header", path);
                } catch (...) {
                }
            }
            if (::ftruncate(append_fd, static_cast<off_t>(old_size)) == 0) ::fsync(append_fd);
            ::close(append_fd);
            append_fd = -1;
        }
    } else if (tmp) {
        tmp->discard();
    }
}

writer::writer(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

writer::writer(const std::string& path, const writer_options& opts) : impl_(std::make_unique<impl>()) {
    auto& s = *impl_;
    s.path = path;
    s.opts = opts;
    if (opts.block_size == 0 || opts.block_size % page)
        raise(errc::InvalidArgument, "writer_options::block_size must be a non-zero multiple of 4096");
    std::uint64_t n = opts.reserve_bytes
                          ? format::align_up<std::uint64_t>(8 + opts.reserve_bytes, page) - 8
                          : reservation_for(opts.expected_tensors, opts.expected_name_length,
                                            opts.expected_metadata_bytes);
    if (n > opts.max_header_size)
        raise(errc::HeaderTooLarge, "header reservation of " + std::to_string(n) + " bytes exceeds the " +
                                        std::to_string(opts.max_header_size) + "-byte limit");
    s.reserved = n;
    s.data_start = 8 + n;
    s.tmp = std::make_unique<temp_file>(path, opts.direct);
    s.stats.direct = s.tmp->direct();
    impl* self = impl_.get();
    s.stream = open_data_stream(*s.tmp, s.data_start, opts.block_size, opts.staging_blocks, opts.queue_depth, path,
                                [self](std::uint64_t off) { return self->describe_offset(off); });
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

const writer_stats& writer::stats() const noexcept {
    auto& s = *impl_;
    if (s.stream) {
        s.stats.staged_bytes = s.stream->staged_bytes();
        s.stats.zero_copy_bytes = s.stream->zero_copy_bytes();
        s.stats.staging_peak = s.stream->staging_peak();
    }
    return s.stats;
}

void writer::impl::start_tensor(std::string_view name, dtype t, const std::vector<std::uint64_t>& shape) {
    if (finished || dead) raise(errc::WriterState, "adding " + describe_tensor(name) + " to a finished or abandoned writer");
    if (open)
        raise(errc::WriterState, "adding " + describe_tensor(name) + " while " +
                                     describe_tensor(entries.back().name) + " is not ended");
    std::uint64_t bytes = tensor_bytes(name, t, shape);
    check_name(name, names);
    tensor_entry e{std::string(name), t, shape, 0, 0};
    e.begin = stream->position() - data_start;
    e.end = e.begin + bytes;
    if (appending) {
        // The header must still fit the file's N: check now, before any byte is written.
        auto all = old_entries;
        all.insert(all.end(), entries.begin(), entries.end());
        all.push_back(e);
        std::uint64_t json = serialized_json_size(all, old_metadata ? &*old_metadata : nullptr);
        if (json > reserved)
            raise(errc::ReservationExceeded, "appending " + describe_tensor(name) + ": the header would need " +
                                                 std::to_string(json) + " bytes but the file reserves " +
                                                 std::to_string(reserved));
    }
    names.insert(e.name);
    entries.push_back(std::move(e));
    open = true;
    open_expected = bytes;
    open_received = 0;
}

void writer::impl::check_put(std::uint64_t size) const {
    if (!open) raise(errc::WriterState, "append() without begin()");
    if (size > open_expected - open_received)
        raise(errc::TensorInvalidInfo, describe_tensor(entries.back().name) + ": " +
                                           std::to_string(open_received + size) +
                                           " bytes given, its shape and dtype need " + std::to_string(open_expected));
}

void writer::impl::put(std::span<const std::byte> bytes, std::shared_ptr<const void> keep) {
    check_put(bytes.size());
    abandon_on_error(*this, [&] {
        if (keep) stream->put_owned(bytes, std::move(keep));
        else stream->put_copy(bytes);
    });
    open_received += bytes.size();
    stats.data_bytes += bytes.size();
}

std::size_t writer::impl::put_ready(std::span<const std::byte> bytes) {
    check_put(bytes.size());
    std::size_t n = stream->put_copy_some(bytes);
    open_received += n;
    stats.data_bytes += n;
    return n;
}

void writer::impl::end_tensor() {
    if (!open) raise(errc::WriterState, "end() without begin()");
    if (open_received != open_expected)
        raise(errc::WriterState, describe_tensor(entries.back().name) + " ended after " +
                                     std::to_string(open_received) + " of its " +
                                     std::to_string(open_expected) + " bytes");
    open = false;
    ++stats.tensors;
}

void writer::impl::begin_add(std::string_view name, dtype t, const std::vector<std::uint64_t>& shape,
                             std::uint64_t size) {
    if (!open && !finished && !dead) {
        std::uint64_t need = tensor_bytes(name, t, shape);
        if (need != size)
            raise(errc::TensorInvalidInfo, describe_tensor(name) + ": " + std::to_string(size) +
                                               " bytes given, its shape and dtype need " + std::to_string(need));
    }
    start_tensor(name, t, shape);
}

void writer::begin(std::string_view name, dtype t, const std::vector<std::uint64_t>& shape) {
    impl_->start_tensor(name, t, shape);
}

void writer::append(std::span<const std::byte> bytes) { impl_->put(bytes, nullptr); }

void writer::append(std::span<const std::byte> bytes, std::shared_ptr<const void> keep) {
    impl_->put(bytes, std::move(keep));
}

void writer::end() { impl_->end_tensor(); }

void writer::add(std::string_view name, dtype t, const std::vector<std::uint64_t>& shape,
                 std::span<const std::byte> bytes) {
    add(name, t, shape, bytes, nullptr);
}

void writer::add(std::string_view name, dtype t, const std::vector<std::uint64_t>& shape,
                 std::span<const std::byte> bytes, std::shared_ptr<const void> keep) {
    auto& s = *impl_;
    s.begin_add(name, t, shape, bytes.size());
    s.put(bytes, std::move(keep));
    s.end_tensor();
}

void writer::impl::check_finishable(const metadata_map* metadata) const {
    if (finished || dead) raise(errc::WriterState, "finish() on a finished or abandoned writer for '" + path + "'");
    if (open)
        raise(errc::WriterState, "finish() while " + describe_tensor(entries.back().name) + " is not ended (" +
                                     std::to_string(open_received) + " of " + std::to_string(open_expected) +
                                     " bytes)");
    if (metadata) check_metadata(*metadata);
}

void writer::finish(const metadata_map* metadata) {
    auto& s = *impl_;
    s.check_finishable(metadata);
    abandon_on_error(s, [&] {
        if (s.appending) s.finish_append(metadata);
        else s.finish_new(metadata);
    });
    s.finished = true;
}

unsigned writer::writes_in_flight() const noexcept {
    return impl_ && impl_->stream ? impl_->stream->in_flight() : 0;
}

void writer::wait_write() {
    auto& s = *impl_;
    if (s.stream) abandon_on_error(s, [&] { s.stream->wait_one(); });
}

void writer::abandon() noexcept {
    if (impl_) impl_->abandon_now();
}

}  // namespace ringsafe
