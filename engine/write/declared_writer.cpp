// Declared mode (ringsafe::declared_writer, see writer.hpp): the header is
// exact from the start; bytes land at known offsets, from any thread.
//
// Files are written with pwrite from the callers' own threads: each producer
// blocks in its own syscall and the kernel runs them in parallel, which is
// what concurrent producers need (a shared ring would serialise them).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "ringsafe/writer.hpp"
#include "write/byte_cover.hpp"
#include "write/stream_writer.hpp"
#include "write/tensor_check.hpp"

namespace ringsafe {

using namespace write;
using file::temp_file;

namespace {

constexpr std::uint64_t piece_bytes = 64u << 20;  // buffered: bytes per pwrite
constexpr std::uint64_t block_bytes = 8u << 20;   // O_DIRECT: bytes per aligned write
constexpr unsigned direct_in_flight = 4;          // O_DIRECT: writes in flight at least
constexpr std::uint64_t direct_align = 4096;

// Runs `work` on the calling thread and threads - 1 others; the first
// exception any of them throws is rethrown after all have returned, with a
// writer-state echo (a write refused because another had failed) reported
// only when nothing else was.
template <class F>
void run_workers(unsigned threads, F&& work) {
    std::exception_ptr first;
    bool first_is_echo = false;
    std::mutex m;
    std::atomic<bool> failed{false};
    auto guarded = [&] {
        try {
            work(failed);
        } catch (...) {
            bool echo = false;
            try {
                throw;
            } catch (const ringsafe::error& e) {
                echo = e.code() == make_error_code(errc::WriterState);
            } catch (...) {
            }
            std::lock_guard lk(m);
            if (!first || (first_is_echo && !echo)) {
                first = std::current_exception();
                first_is_echo = echo;
            }
            failed = true;
        }
    };
    std::vector<std::thread> extra;
    try {
        for (unsigned i = 1; i < threads; ++i) extra.emplace_back(guarded);
    } catch (...) {  // no more threads: the ones started (and this one) do the rest
    }
    guarded();
    for (auto& t : extra) t.join();
    if (first) std::rethrow_exception(first);
}

// O_DIRECT on `fd` for the lifetime of this object, where the filesystem allows it.
class direct_mode {
public:
    explicit direct_mode(int fd) : fd_(fd) {
        flags_ = ::fcntl(fd, F_GETFL);
        on_ = flags_ >= 0 && !(flags_ & O_DIRECT) && ::fcntl(fd, F_SETFL, flags_ | O_DIRECT) == 0;
    }
    ~direct_mode() {
        if (on_) ::fcntl(fd_, F_SETFL, flags_);
    }
    direct_mode(const direct_mode&) = delete;
    direct_mode& operator=(const direct_mode&) = delete;
    bool on() const noexcept { return on_; }

private:
    int fd_;
    int flags_ = -1;
    bool on_ = false;
};

// Progress and cancellation of one write_all call, shared by its workers.
struct write_all_run {
    const read_control& ctl;
    std::span<const std::span<const std::byte>> data;  // per declared tensor
    std::uint64_t total = 0;                           // bytes of data, all tensors
    std::atomic<std::uint64_t> done{0};

    void progress(std::uint64_t n) {
        const std::uint64_t d = done.fetch_add(n) + n;
        if (ctl.on_progress) ctl.on_progress(d, total);
    }
    bool cancelled() const { return ctl.cancel && ctl.cancel->load(); }
};

// Fills `out` with the file's bytes [lo, hi): the header block's (`head`, up
// to data_start), the tensors' (`data` at `entries`' offsets, up to file_end),
// zeros past file_end. Returns the tensor bytes it holds. No I/O.
std::uint64_t fill_block(std::byte* out, std::uint64_t lo, std::uint64_t hi, const std::byte* head,
                         std::uint64_t data_start, std::uint64_t file_end, const std::vector<tensor_entry>& entries,
                         std::span<const std::span<const std::byte>> data) {
    if (lo < data_start)  // the header's bytes
        std::memcpy(out, head + lo, std::min(hi, data_start) - lo);
    std::uint64_t payload = 0;
    if (hi > data_start && lo < file_end) {
        const std::uint64_t a = std::max(lo, data_start) - data_start;
        const std::uint64_t z = std::min(hi, file_end) - data_start;
        // The first tensor ending after a, then each one starting before z.
        auto it = std::upper_bound(entries.begin(), entries.end(), a,
                                   [](std::uint64_t v, const tensor_entry& e) { return v < e.end; });
        for (; it != entries.end() && it->begin < z; ++it) {
            const std::uint64_t from = std::max(a, it->begin), to = std::min(z, it->end);
            if (from >= to) continue;
            const auto i = static_cast<std::size_t>(it - entries.begin());
            std::memcpy(out + (data_start + from - lo), data[i].data() + (from - it->begin), to - from);
        }
        payload = z - a;
    }
    if (hi > file_end) std::memset(out + (std::max(lo, file_end) - lo), 0, hi - std::max(lo, file_end));
    return payload;
}

}  // namespace

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
    std::vector<byte_cover> written;  // per tensor: the bytes written
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
    }

    void mark(std::size_t i, std::uint64_t a, std::uint64_t b) { written[i].mark(a, b); }
    // write_all's two halves, after its checks: buffered through w.write()
    // (file or sequential sink), and O_DIRECT (file mode, O_DIRECT on).
    void write_buffered(declared_writer& w, write_all_run& run, unsigned threads);
    void write_direct(write_all_run& run, unsigned threads);
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

bool declared_writer::write_all(std::span<const std::span<const std::byte>> data, unsigned threads, bool direct,
                                const read_control& ctl) {
    auto& s = *impl_;
    if (data.size() != s.entries.size())
        raise(errc::InvalidArgument, std::to_string(data.size()) + " tensors given, " +
                                         std::to_string(s.entries.size()) + " declared");
    write_all_run run{ctl, data};
    for (std::size_t i = 0; i < data.size(); ++i) {
        const auto& e = s.entries[i];
        if (data[i].size() != e.end - e.begin)
            raise(errc::InvalidArgument, describe_tensor(e.name) + ": " + std::to_string(data[i].size()) +
                                             " bytes given, " + std::to_string(e.end - e.begin) + " declared");
        run.total += data[i].size();
    }
    threads = std::max(threads, 1u);
    std::optional<direct_mode> dm;
    if (direct && s.tmp && s.sink < 0) dm.emplace(s.tmp->fd());
    if (!dm || !dm->on()) {
        s.write_buffered(*this, run, threads);
        return false;
    }
    s.write_direct(run, threads);
    return true;
}

// Buffered: 64 MiB pieces of the tensors, in file order, each through
// w.write(), into a file given its size first (as the reference does): no
// write extends it.
void declared_writer::impl::write_buffered(declared_writer& w, write_all_run& run, unsigned threads) {
    const auto data = run.data;
    if (tmp && sink < 0 && ::ftruncate(tmp->fd(), static_cast<off_t>(data_start + run.total)) != 0) {
        const int err = errno;
        std::lock_guard lock(mu);
        failed = true;
        raise_errno(err, "extending '" + tmp->target() + "' to " + std::to_string(data_start + run.total) + " bytes",
                    tmp->target());
    }
    struct piece {
        std::size_t tensor;
        std::uint64_t offset, length;
    };
    std::vector<piece> pieces;
    for (std::size_t i = 0; i < data.size(); ++i)
        for (std::uint64_t o = 0; o < data[i].size(); o += piece_bytes)
            pieces.push_back({i, o, std::min(piece_bytes, data[i].size() - o)});
    std::atomic<std::size_t> next{0};
    // A sequential sink takes the bytes in order: one thread.
    const unsigned n = sink >= 0 ? 1u : threads;
    run_workers(std::min<unsigned>(n, static_cast<unsigned>(std::max<std::size_t>(pieces.size(), 1))),
                [&](std::atomic<bool>& stop) {
                    for (;;) {
                        if (stop.load() || run.cancelled()) return;
                        const std::size_t k = next.fetch_add(1);
                        if (k >= pieces.size()) return;
                        const piece& p = pieces[k];
                        w.write(p.tensor, p.offset, data[p.tensor].subspan(p.offset, p.length));
                        run.progress(p.length);
                    }
                });
    if (run.cancelled())
        raise(errc::Cancelled, "writing '" + (tmp ? tmp->target() : std::string("the output stream")) + "' was cancelled");
}

// O_DIRECT: the whole file in aligned blocks, each assembled from the header
// and the tensors it covers (fill_block), the last one zero-padded (cut back
// below). The file is extended to its end first: ext4 serialises direct
// writes that extend a file, and runs those inside it in parallel.
void declared_writer::impl::write_direct(write_all_run& run, unsigned threads) {
    const int fd = tmp->fd();
    const std::string& target = tmp->target();
    {
        std::lock_guard lock(mu);
        if (failed || finished) raise(errc::WriterState, "writing '" + target + "': the writer is finished or failed");
    }
    const auto head = header_block(header);
    const std::uint64_t file_end = data_start + run.total;
    const std::uint64_t padded = (file_end + direct_align - 1) / direct_align * direct_align;
    try {
        if (::fallocate(fd, 0, 0, static_cast<off_t>(padded)) != 0 && ::ftruncate(fd, static_cast<off_t>(padded)) != 0)
            raise_errno(errno, "extending '" + target + "' to " + std::to_string(padded) + " bytes", target);
        const std::uint64_t blocks = (padded + block_bytes - 1) / block_bytes;
        std::atomic<std::uint64_t> next{0};
        run_workers(static_cast<unsigned>(std::min<std::uint64_t>(std::max(threads, direct_in_flight), blocks)),
                    [&](std::atomic<bool>& stop) {
                        std::unique_ptr<std::byte, void (*)(void*)> staging{
                            static_cast<std::byte*>(std::aligned_alloc(direct_align, block_bytes)), std::free};
                        if (!staging) raise_errno(ENOMEM, "allocating staging memory to write '" + target + "'");
                        for (;;) {
                            if (stop.load() || run.cancelled()) return;
                            const std::uint64_t b = next.fetch_add(1);
                            if (b >= blocks) return;
                            const std::uint64_t lo = b * block_bytes, hi = std::min(padded, lo + block_bytes);
                            const std::uint64_t payload =
                                fill_block(staging.get(), lo, hi, head.get(), data_start, file_end, entries, run.data);
                            pwrite_all(fd, staging.get(), hi - lo, lo,
                                       "writing '" + target + "' at file offset " + std::to_string(lo), target);
                            run.progress(payload);
                        }
                    });
        if (run.cancelled()) raise(errc::Cancelled, "writing '" + target + "' was cancelled");
        if (::ftruncate(fd, static_cast<off_t>(file_end)) != 0)
            raise_errno(errno, "truncating '" + target + "' to " + std::to_string(file_end) + " bytes", target);
    } catch (...) {
        std::lock_guard lock(mu);
        failed = true;
        throw;
    }
    std::lock_guard lock(mu);
    for (std::size_t i = 0; i < entries.size(); ++i) mark(i, 0, entries[i].end - entries[i].begin);
}

void declared_writer::finish() {
    auto& s = *impl_;
    std::lock_guard lock(s.mu);
    if (s.failed || s.finished) raise(errc::WriterState, "finish() after a failed write or a finish");
    for (std::size_t i = 0; i < s.entries.size(); ++i) {
        const std::uint64_t size = s.entries[i].end - s.entries[i].begin;
        if (s.written[i].covered() == size) continue;
        raise(errc::WriterState, describe_tensor(s.entries[i].name) + " is incomplete: " +
                                     s.written[i].describe_missing(size));
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
