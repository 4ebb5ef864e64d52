// open_file: local files as ringsafe::source, executed on io_uring.
#include "format/alignment.hpp"
#include "ringsafe/file_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <thread>
#include <vector>

#include "file/dio_alignment.hpp"
#include "file/file_open.hpp"
#include "file/page_cache_probe.hpp"
#include "ringsafe/error.hpp"
#include "source/async_source.hpp"
#include "uring/file_run.hpp"
#include "uring/file_source.hpp"
#include "uring/file_view.hpp"
#include "uring/read_executor.hpp"
#include "uring/ring_pool.hpp"
#include "uring/worker_ring.hpp"

namespace ringsafe {
namespace {

class file_source final : public source, public detail::async_source {
public:
    // Takes over a file opened by open_blocking() or async_open; named `name`
    // (empty: the path).
    file_source(std::string path, const file_options& opts, file::opened_file f, std::string name)
        : path_(std::move(path)), name_(name.empty() ? path_ : std::move(name)), opts_(opts), size_(f.size), align_(opts.direct ? f.align : file::dio_alignment{1, 1}),
          prefix_(std::move(f.prefix)), device_(f.device), inode_(f.inode), mtime_ns_(f.mtime_ns) {
        fd_ = f.fd.release();
        dfd_ = f.direct_fd.release();
        threads_ = opts_.threads ? opts_.threads : std::max(1u, std::thread::hardware_concurrency());
    }
    ~file_source() override {
        kept_.clear();
        leased_.clear();  // back to the pool, still attached to this source's files
        uring::release_owner(owner_);  // before the files close: idle rings still registered with them let go
        for (int fd : ring_fds_)
            if (fd >= 0) ::close(fd);
        if (dfd_ >= 0) ::close(dfd_);
        if (fd_ >= 0) ::close(fd_);
    }

    const std::string& name() const noexcept override { return name_; }
    std::uint64_t size() const noexcept override { return size_; }
    std::span<const std::byte> prefix() const noexcept override { return prefix_; }

    // Asynchronous reads: the ops as a job on the context's event ring.
    bool can_start_async() const noexcept override { return uring::file_runs_on_ring(view()); }
    std::shared_ptr<detail::async_run> start_async(const detail::async_context& ctx, std::span<const read_op> ops,
                                                   detail::async_callbacks cb) override {
        return uring::start_file_run(ctx, view(), ops, std::move(cb));
    }

    void read_exact(std::uint64_t offset, std::span<std::byte> dst) override {
        file::pread_exact(fd_, path_, offset, dst);
    }

    void execute(std::span<const read_op> ops, const io_control& ctl) override {
        std::lock_guard lock(execute_mutex_);
        drop_inherited_rings();
        // Pooled: the helper rings go back to the pool when this call
        // returns; ring 0 stays for the next call (a reader read again and
        // again pays nothing for the pool) until the source closes.
        struct hand_back {
            std::vector<uring::ring_lease>& leases;
            ~hand_back() {
                if (leases.size() > 1) leases.resize(1);
            }
        } back{leased_};
        auto& rings = pooled_ ? leased_ : kept_;
        uring::read_target t;
        t.path = &path_;
        t.size = size_;
        t.direct = opts_.direct;
        t.align = align_.offset;
        t.mem_align = align_.memory;
        t.chunk_size = chunk_size();
        if (!opts_.direct) {
            using mode = file_options::buffered_mode;
            // A small plan runs inline whatever the cache holds (execute_reads):
            // automatic mode skips the page-cache probe for it.
            const bool small = uring::plan_bytes(ops) < uring::inline_plan_bytes;
            t.streams = opts_.mode == mode::cold ||
                        (opts_.mode == mode::automatic && !small && file::cached_fraction(fd_, ops) < hot_fraction);
            t.async_punt = opts_.async_punt && !t.streams;
        }
        uring::ring_set set;
        set.count = threads_;
        set.depth = opts_.queue_depth;
        set.get = [this, &rings](std::size_t i) -> uring::worker_ring& {
            if (i == rings.size()) rings.push_back(uring::take_ring(ring_setup(i), owner_));
            return *rings[i];
        };
        uring::execute_reads(set, t, ops, ctl);
    }

    uring::file_view view() const noexcept {
        return {fd_, size_, &path_, opts_.direct, dfd_, align_.offset, align_.memory};
    }

    source_hints hints() const noexcept override {
        source_hints h;
        h.preferred_chunk = chunk_size();
        h.alignment = opts_.direct ? align_.offset : 1;
        h.device = device_;
        h.inode = inode_;
        h.mtime_ns = mtime_ns_;
        h.file = path_;
        return h;
    }

private:
    std::uint64_t chunk_size() const noexcept {
        const std::uint64_t a = opts_.direct ? align_.offset : 1;
        return format::align_up<std::uint64_t>(opts_.chunk_size, a);
    }

    // In a fork() child, the rings the parent kept share its SQ/CQ memory:
    // unmap and close the child's copies without touching them (fresh rings
    // are then taken on first use). The parent's rings are untouched. Worker
    // threads and helper rings are held only inside execute_reads, so none is
    // inherited.
    void drop_inherited_rings() noexcept {
        for (auto* rings : {&kept_, &leased_}) {
            if (rings->empty() || !rings->front()->inherited()) continue;
            for (auto& r : *rings) r->abandon();
            rings->clear();
        }
    }

    // How ring i is set up. Buffered rings after the first read through their
    // own open file description, so that each sequential stream has its own
    // readahead state.
    uring::ring_setup ring_setup(std::size_t i) {
        uring::ring_setup rs;
        rs.fd = opts_.direct ? dfd_ : fd_;
        if (!opts_.direct && i > 0) rs.fd = own_description(i);
        rs.depth = opts_.queue_depth;
        rs.register_file = opts_.register_buffers;
        rs.bounce = opts_.direct;
        rs.register_buffers = opts_.register_buffers;
        rs.edge_size = align_.offset;
        rs.mem_align = std::max<std::uint32_t>(align_.memory, 64);
        rs.big_size = std::min<std::uint64_t>(1u << 20, chunk_size());
        return rs;
    }

    // Ring i's own open file description of the file (made on first need and
    // kept), or fd_ when none could be made.
    int own_description(std::size_t i) {
        while (ring_fds_.size() < i) ring_fds_.push_back(reopen());
        return ring_fds_[i - 1] >= 0 ? ring_fds_[i - 1] : fd_;
    }

    // A new open file description of the same file (reopened through
    // /proc/self/fd, checked to be the same inode), or -1.
    int reopen() const {
        const std::string link = "/proc/self/fd/" + std::to_string(fd_);
        const int fd = ::open(link.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) return -1;
        struct stat a {}, b {};
        if (::fstat(fd, &a) != 0 || ::fstat(fd_, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
            ::close(fd);
            return -1;
        }
        return fd;
    }

    // automatic mode: at least this fraction of the planned bytes cached = hot.
    static constexpr double hot_fraction = 0.9;

    std::string path_;
    std::string name_;  // the path, or the URL a store's cache file holds
    file_options opts_;
    int fd_ = -1;   // buffered: prefix, read_exact, and execute unless direct
    int dfd_ = -1;  // O_DIRECT: execute when opts_.direct
    std::uint64_t size_ = 0;
    file::dio_alignment align_{1, 1};
    unsigned threads_ = 1;
    std::vector<std::byte> prefix_;
    std::uint64_t device_ = 0, inode_ = 0;
    std::int64_t mtime_ns_ = 0;
    std::mutex execute_mutex_;
    // Whether rings are leased from the process-wide pool (ring 0 until the
    // source closes, the others per execute()), or (RINGSAFE_RING_POOL=0)
    // made on first use and kept in kept_.
    const bool pooled_ = uring::ring_pool_enabled();
    const std::uint64_t owner_ = uring::new_ring_owner();
    std::vector<uring::ring_lease> kept_;
    std::vector<uring::ring_lease> leased_;  // pooled: ring 0, and the helpers of the execute() running now
    std::vector<int> ring_fds_;  // own descriptions of rings 1, 2, ... (buffered; -1: none)
};

}  // namespace

namespace uring {
std::optional<file_view> view_file(const source& src) noexcept {
    if (auto* f = dynamic_cast<const file_source*>(&src)) return f->view();
    return std::nullopt;
}
}  // namespace uring

namespace uring {
void check_file_options(const std::string& path, const file_options& o) {
    auto bad = [&](const std::string& what) { raise(errc::InvalidArgument, path + ": file_options: " + what); };
    if (o.queue_depth == 0 || o.queue_depth > 4096) bad("queue_depth must be 1..4096");
    if (o.chunk_size < 4096 || o.chunk_size > (1u << 30)) bad("chunk_size must be 4 KiB..1 GiB");
    if (o.threads > 256) bad("threads must be 0..256");
    if (o.prefetch > (1u << 30)) bad("prefetch must be at most 1 GiB");
}

std::unique_ptr<source> adopt_file(std::string path, const file_options& opts, file::opened_file f, std::string name) {
    check_file_options(path, opts);
    return std::make_unique<file_source>(std::move(path), opts, std::move(f), std::move(name));
}

std::unique_ptr<source> open_file_named(const std::string& path, const std::string& name, const file_options& opts) {
    check_file_options(path, opts);
    return adopt_file(path, opts, file::open_blocking(path, opts.direct, opts.prefetch), name);
}
}  // namespace uring

std::unique_ptr<source> open_file(const std::string& path, const file_options& opts) {
    uring::check_file_options(path, opts);
    return uring::adopt_file(path, opts, file::open_blocking(path, opts.direct, opts.prefetch));
}

}  // namespace ringsafe
