// Declared mode (ringsafe::declared_writer, see writer.hpp): the header is
// exact from the start; bytes land at known offsets, from any thread.
//
// Files are written with pwrite from the callers' own threads: each producer
// blocks in its own syscall and the kernel runs them in parallel, which is
// what concurrent producers need (a shared ring would serialise them).
#include <unistd.h>

#include <map>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "ringsafe/writer.hpp"
#include "write/stream_writer.hpp"
#include "write/tensor_check.hpp"

namespace ringsafe {

using namespace write_engine;
using publish::temp_file;

struct declared_writer::impl {
    std::vector<tensor_entry> entries;
    std::unordered_map<std::string, std::size_t> by_name;
    std::string header;  // N bytes
    std::uint64_t data_start = 0;
    declared_options opts;
    std::unique_ptr<temp_file> tmp;  // file mode
    int sink = -1;                   // sequential mode (not owned)
    std::uint64_t cursor = 0;        // sequential mode: next data-relative offset
    std::mutex mu;
    std::vector<std::map<std::uint64_t, std::uint64_t>> written;  // per tensor: begin -> end, disjoint
    std::vector<std::uint64_t> covered;                           // per tensor: bytes written
    bool failed = false, finished = false;

    void setup(std::vector<tensor_decl>& decls, const metadata_map* metadata) {
        std::unordered_set<std::string> seen;
        std::uint64_t off = 0;
        for (auto& d : decls) {
            std::uint64_t n = tensor_bytes(d.name, d.dtype, d.shape);
            check_name(d.name, seen);
            seen.insert(d.name);
            if (__builtin_add_overflow(off, n, &off))
                raise(errc::ValidationOverflow, describe_tensor(d.name) + ": data section size overflows 64 bits");
            entries.push_back({std::move(d.name), d.dtype, std::move(d.shape), off - n, off});
            by_name.emplace(entries.back().name, entries.size() - 1);
        }
        if (metadata) check_metadata(*metadata);
        std::uint64_t json = serialized_json_size(entries, metadata);
        if (json > opts.max_header_size)
            raise(errc::HeaderTooLarge, "the declared header needs " + std::to_string(json) + " bytes, above the " +
                                            std::to_string(opts.max_header_size) + "-byte limit");
        header = serialize_header(entries, metadata);
        data_start = 8 + header.size();
        written.resize(entries.size());
        covered.assign(entries.size(), 0);
    }

    // Records [a, b) of tensor i as written; returns the bytes newly covered.
    void mark(std::size_t i, std::uint64_t a, std::uint64_t b) {
        auto& m = written[i];
        auto it = m.upper_bound(a);
        if (it != m.begin() && std::prev(it)->second >= a) --it;
        while (it != m.end() && it->first <= b) {
            a = std::min(a, it->first);
            b = std::max(b, it->second);
            covered[i] -= it->second - it->first;
            it = m.erase(it);
        }
        m.emplace(a, b);
        covered[i] += b - a;
    }
};

declared_writer::declared_writer(const std::string& path, std::vector<tensor_decl> tensors,
                                 const metadata_map* metadata, const declared_options& opts)
    : impl_(std::make_unique<impl>()) {
    impl_->opts = opts;
    impl_->setup(tensors, metadata);
    impl_->tmp = std::make_unique<temp_file>(path, false);
    auto block = header_block(impl_->header);
    pwrite_all(impl_->tmp->fd(), block.get(), impl_->data_start, 0, "writing the header of '" + path + "'", path);
}

declared_writer::declared_writer(int fd, std::vector<tensor_decl> tensors, const metadata_map* metadata,
                                 const declared_options& opts)
    : impl_(std::make_unique<impl>()) {
    impl_->opts = opts;
    impl_->setup(tensors, metadata);
    impl_->sink = fd;
    auto block = header_block(impl_->header);
    const auto* p = reinterpret_cast<const char*>(block.get());
    std::uint64_t left = impl_->data_start;
    while (left) {
        ssize_t n = ::write(fd, p, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) raise_errno(n < 0 ? errno : EIO, "writing the header to the output stream");
        p += n, left -= static_cast<std::uint64_t>(n);
    }
}

declared_writer::~declared_writer() { abandon(); }

std::size_t declared_writer::index(std::string_view name) const {
    auto it = impl_->by_name.find(std::string(name));
    if (it == impl_->by_name.end()) raise(errc::TensorNotFound, describe_tensor(name) + " was not declared");
    return it->second;
}

const std::vector<tensor_entry>& declared_writer::tensors() const noexcept { return impl_->entries; }

const std::string& declared_writer::header_json() const noexcept { return impl_->header; }

void declared_writer::write(std::size_t tensor, std::uint64_t offset, std::span<const std::byte> bytes) {
    auto& s = *impl_;
    if (tensor >= s.entries.size())
        raise(errc::InvalidArgument, "tensor index " + std::to_string(tensor) + " is out of range");
    const auto& e = s.entries[tensor];
    std::uint64_t end = 0;
    if (__builtin_add_overflow(offset, bytes.size(), &end) || end > (e.end - e.begin))
        raise(errc::InvalidArgument, describe_tensor(e.name) + ": bytes [" + std::to_string(offset) + ", " +
                                         std::to_string(offset) + "+" + std::to_string(bytes.size()) +
                                         ") exceed its " + std::to_string((e.end - e.begin)) + " bytes");
    std::uint64_t file_off = s.data_start + e.begin + offset;
    std::string what = "writing " + describe_tensor(e.name) + " at byte " + std::to_string(offset) + " of it";
    if (s.sink >= 0) {
        std::lock_guard lock(s.mu);
        if (s.failed || s.finished) raise(errc::WriterState, what + ": the writer is finished or failed");
        if (e.begin + offset != s.cursor)
            raise(errc::WriterState, what + ": a sequential sink needs data offset " + std::to_string(s.cursor) +
                                         " next (bytes must arrive in declared order)");
        try {
            const auto* p = reinterpret_cast<const char*>(bytes.data());
            std::uint64_t left = bytes.size();
            while (left) {
                ssize_t n = ::write(s.sink, p, left);
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) raise_errno(n < 0 ? errno : EIO, what);
                p += n, left -= static_cast<std::uint64_t>(n);
            }
        } catch (...) {
            s.failed = true;
            throw;
        }
        s.cursor += bytes.size();
        s.mark(tensor, offset, end);
        return;
    }
    {
        std::lock_guard lock(s.mu);
        if (s.failed || s.finished || !s.tmp) raise(errc::WriterState, what + ": the writer is finished or failed");
    }
    try {
        pwrite_all(s.tmp->fd(), bytes.data(), bytes.size(), file_off, what + " to '" + s.tmp->target() + "'",
                   s.tmp->target());
    } catch (...) {
        std::lock_guard lock(s.mu);
        s.failed = true;
        throw;
    }
    std::lock_guard lock(s.mu);
    s.mark(tensor, offset, end);
}

void declared_writer::finish() {
    auto& s = *impl_;
    std::lock_guard lock(s.mu);
    if (s.failed || s.finished) raise(errc::WriterState, "finish() after a failed write or a finish");
    for (std::size_t i = 0; i < s.entries.size(); ++i) {
        if (s.covered[i] == (s.entries[i].end - s.entries[i].begin)) continue;
        std::uint64_t missing = 0;
        auto& m = s.written[i];
        if (!m.empty() && m.begin()->first == 0) missing = m.begin()->second;
        raise(errc::WriterState, describe_tensor(s.entries[i].name) + " is incomplete: " +
                                     std::to_string(s.covered[i]) + " of " + std::to_string((s.entries[i].end - s.entries[i].begin)) +
                                     " bytes written, first missing byte at offset " + std::to_string(missing));
    }
    if (s.tmp) {
        try {
            s.tmp->publish(s.opts.sync, s.opts.sync_dir);
        } catch (...) {
            s.failed = true;
            s.tmp->discard();
            throw;
        }
    }
    s.finished = true;
}

void declared_writer::abandon() noexcept {
    if (!impl_) return;
    std::lock_guard lock(impl_->mu);
    if (impl_->finished) return;
    impl_->failed = true;
    if (impl_->tmp) impl_->tmp->discard();
}

}  // namespace ringsafe
