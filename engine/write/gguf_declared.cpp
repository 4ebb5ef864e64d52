// Declared GGUF writing (gguf::declared_writer, see gguf_writer.hpp): the
// header is exact from the start; bytes land at known offsets, from any
// thread, with pwrite from the callers' own threads.
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <unordered_map>

#include "file/temp_file.hpp"
#include "format/alignment.hpp"
#include "write/byte_cover.hpp"
#include "write/gguf_entries.hpp"
#include "write/stream_writer.hpp"
#include "write/tensor_check.hpp"

namespace ringsafe::gguf {

using write::describe_tensor;

struct declared_writer::impl {
    std::string path;
    writer_options opts;
    std::vector<tensor_record> records;
    std::vector<std::uint64_t> begins, sizes;
    std::unordered_map<std::string, std::size_t> by_name;
    std::uint64_t data_start = 0, data_size = 0;
    std::unique_ptr<file::temp_file> tmp;
    std::mutex mu;
    std::vector<write::byte_cover> written;
    bool failed = false, finished = false;

    void fail() noexcept {
        std::lock_guard lock(mu);
        failed = true;
        if (tmp) tmp->discard();
    }
};

declared_writer::declared_writer(const std::string& path, std::vector<metadata_entry> metadata,
                                 std::vector<tensor_record> tensors, const writer_options& opts)
    : impl_(std::make_unique<impl>()) {
    auto& s = *impl_;
    s.path = path;
    s.opts = opts;
    const std::vector<metadata_entry> md = write::stored_metadata(std::move(metadata), opts.alignment);
    for (const tensor_record& t : tensors) {
        s.begins.push_back(s.data_size);
        s.sizes.push_back(tensor_bytes(t));
        s.data_size += format::align_up<std::uint64_t>(s.sizes.back(), opts.alignment);
        s.by_name.emplace(t.name, s.by_name.size());
    }
    const std::string header = serialize(md, tensors, opts.alignment);  // DuplicateTensor, ... before any byte
    s.records = std::move(tensors);
    s.data_start = header.size();
    s.written.resize(s.records.size());
    s.tmp = std::make_unique<file::temp_file>(path, false);
    try {
        write::pwrite_all(s.tmp->fd(), header.data(), header.size(), 0, "writing the GGUF header of '" + path + "'",
                          path);
    } catch (...) {
        s.tmp->discard();
        throw;
    }
}

declared_writer::~declared_writer() { abandon(); }

std::size_t declared_writer::index(std::string_view name) const {
    auto it = impl_->by_name.find(std::string(name));
    if (it == impl_->by_name.end()) raise(errc::TensorNotFound, describe_tensor(name) + " was not declared");
    return it->second;
}

std::uint64_t declared_writer::data_offset() const noexcept { return impl_->data_start; }

std::uint64_t declared_writer::offset(std::size_t tensor) const {
    if (tensor >= impl_->begins.size())
        raise(errc::InvalidArgument, "tensor index " + std::to_string(tensor) + " is out of range");
    return impl_->begins[tensor];
}

std::uint64_t declared_writer::size(std::size_t tensor) const {
    if (tensor >= impl_->sizes.size())
        raise(errc::InvalidArgument, "tensor index " + std::to_string(tensor) + " is out of range");
    return impl_->sizes[tensor];
}

void declared_writer::write(std::size_t tensor, std::uint64_t offset, std::span<const std::byte> bytes) {
    auto& s = *impl_;
    const std::uint64_t size = this->size(tensor);
    const std::string& name = s.records[tensor].name;
    std::uint64_t end = 0;
    if (__builtin_add_overflow(offset, bytes.size(), &end) || end > size)
        raise(errc::InvalidArgument, describe_tensor(name) + ": bytes [" + std::to_string(offset) + ", " +
                                         std::to_string(offset) + "+" + std::to_string(bytes.size()) +
                                         ") exceed its " + std::to_string(size) + " bytes");
    {
        std::lock_guard lock(s.mu);
        if (s.failed || s.finished)
            raise(errc::WriterState, "writing " + describe_tensor(name) + ": the GGUF writer is finished or failed");
    }
    try {
        write::pwrite_all(s.tmp->fd(), bytes.data(), bytes.size(), s.data_start + s.begins[tensor] + offset,
                          "writing " + describe_tensor(name) + " at byte " + std::to_string(offset) + " of it", s.path);
    } catch (...) {
        s.fail();
        throw;
    }
    std::lock_guard lock(s.mu);
    s.written[tensor].mark(offset, end);
}

void declared_writer::finish() {
    auto& s = *impl_;
    std::unique_lock lock(s.mu);
    if (s.failed || s.finished) raise(errc::WriterState, "finish() after a failed write or a finish");
    for (std::size_t i = 0; i < s.records.size(); ++i)
        if (s.written[i].covered() != s.sizes[i])
            raise(errc::WriterState, describe_tensor(s.records[i].name) + " is incomplete: " +
                                         s.written[i].describe_missing(s.sizes[i]));
    lock.unlock();
    try {
        // The padding after the last tensor (and any gap never written) reads as zeros.
        const std::uint64_t end = s.data_start + s.data_size;
        if (::ftruncate(s.tmp->fd(), static_cast<off_t>(end)) != 0)
            raise_errno(errno, "extending '" + s.path + "' to " + std::to_string(end) + " bytes", s.path);
        s.tmp->publish(s.opts.sync, s.opts.sync_dir);
    } catch (...) {
        s.fail();
        throw;
    }
    s.finished = true;
}

void declared_writer::abandon() noexcept {
    if (!impl_ || impl_->finished) return;
    impl_->fail();
}

}  // namespace ringsafe::gguf
