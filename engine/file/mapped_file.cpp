// mapped_file: one private mapping of a local file, populated in parallel:
// the mapped read backend (the Python package's backend="mmap", and its
// copies of hot checkpoints into caller memory).
//
// Why populate at all: a lazy mapping pays a page fault per 64 KiB (fault
// around; less where the page cache holds large folios) the first time each
// part is touched, on whichever thread touches it, and on a cold file each of
// those faults waits for the disk. Cached chunks are mapped by one read per
// 64 KiB on every core; chunks not cached are populated by up to 8 threads at
// once (MADV_POPULATE_READ, whose faults drive the kernel's readahead), so
// several requests keep the disk busy. MADV_WILLNEED of each chunk first does
// no better. The figures: bench/README.md, "Mapped files".
#include "ringsafe/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <cerrno>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "file/page_residency.hpp"
#include "file/stream_copy.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe {

namespace {

using file::all_cached;
using file::cached_pages_of;
using file::looks_resident;
using file::populate_read;
using file::stream_copy;
using file::touch_pages;

constexpr std::uint64_t page = file::page_bytes;
// A chunk: the unit of work one thread populates at a time.
constexpr std::uint64_t chunk_bytes = 8u << 20;
// Below this many bytes the calling thread does it all (no thread start-up),
// and below hot_inline_bytes too when the range looks cached: mapping cached
// pages runs at tens of GB/s, a thread start costs more than that much of it.
constexpr std::uint64_t inline_bytes = 16u << 20;
constexpr std::uint64_t hot_inline_bytes = 64u << 20;
// copy_to(): the unit of work one thread copies at a time (pieces end at
// multiples of it in the file), and the total below which the calling thread
// copies alone.
constexpr std::uint64_t copy_piece_bytes = 4u << 20;
constexpr std::uint64_t copy_inline_bytes = 8u << 20;

struct chunk {
    std::uint64_t begin;    // page-aligned offsets into the mapping
    std::uint64_t end;
    std::uint64_t payload;  // bytes of the caller's range inside [begin, end): what progress counts
};

// Page-aligned chunks covering `ranges`, in the order given.
std::vector<chunk> chunks_of(std::span<const mapped_range> ranges, std::uint64_t mapped_end) {
    std::vector<chunk> out;
    for (const auto& r : ranges) {
        if (r.length == 0) continue;
        std::uint64_t b = r.offset / page * page;
        const std::uint64_t e = std::min(mapped_end, (r.offset + r.length + page - 1) / page * page);
        for (; b < e; b += chunk_bytes) {
            const std::uint64_t ce = std::min(e, b + chunk_bytes);
            out.push_back({b, ce, std::min(ce, r.offset + r.length) - std::max(b, r.offset)});
        }
    }
    return out;
}

// The first read of each page of a chunk just made resident, on the
// populating threads beside their reads instead of on the caller's one thread:
// where the hypervisor hands back guest memory the guest freed (virtio-balloon
// free page reporting), the first access to each page the disk filled costs a
// host fault after MADV_POPULATE_READ has returned (bench/README.md, "Mapped
// files"). Elsewhere it is one cached load per page.
void first_access(const std::byte* p, std::uint64_t n) { touch_pages(p, n, page); }

// InvalidArgument unless [offset, +length) lies inside a file of `size` bytes at `path`.
void check_range(std::uint64_t offset, std::uint64_t length, std::uint64_t size, const std::string& path) {
    if (offset > size || length > size - offset)
        raise(errc::InvalidArgument, "range " + std::to_string(offset) + "+" + std::to_string(length) +
                                         " is past the end of " + path + " (" + std::to_string(size) + " bytes)");
}

// Runs each(i) for i in [0, count) on the calling thread and threads - 1
// others, each taking the next index; reports the bytes each(i) returns as
// progress of `total`. The first exception stops the others at their next
// index and is rethrown after all are joined; a set ctl.cancel is Cancelled
// ("`cancelled`"). Fewer threads when the system refuses more.
template <class Each>
void share_out(std::size_t count, unsigned threads, const read_control& ctl, std::uint64_t total,
               const std::string& cancelled, Each&& each) {
    std::atomic<std::size_t> next{0};
    std::atomic<std::uint64_t> done{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto work = [&] {
        try {
            for (;;) {
                if (failed.load(std::memory_order_relaxed)) return;
                if (ctl.cancel && ctl.cancel->load()) raise(errc::Cancelled, cancelled);
                const std::size_t i = next.fetch_add(1);
                if (i >= count) return;
                const std::uint64_t n = each(i);
                const std::uint64_t d = done.fetch_add(n) + n;
                if (ctl.on_progress) ctl.on_progress(d, total);
            }
        } catch (...) {
            std::lock_guard lk(error_mutex);
            if (!error) error = std::current_exception();
            failed.store(true);
        }
    };
    std::vector<std::thread> pool;
    if (threads > 1) {
        pool.reserve(threads - 1);
        try {
            for (unsigned t = 1; t < threads; ++t) pool.emplace_back(std::ref(work));
        } catch (...) {  // no more threads: the ones started (and this one) do the rest
        }
    }
    work();
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace

mapped_file mapped_file::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) raise_errno(errno, "cannot open " + path, path);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        raise_errno(err, "cannot stat " + path, path);
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        if (S_ISDIR(st.st_mode)) raise_errno(EISDIR, "cannot map " + path, path);
        raise(errc::InvalidArgument, "cannot map " + path + ": not a regular file");
    }
    mapped_file m;
    m.path_ = path;
    m.size_ = static_cast<std::uint64_t>(st.st_size);
    m.device_ = static_cast<std::uint64_t>(st.st_dev);
    m.inode_ = static_cast<std::uint64_t>(st.st_ino);
    m.mtime_ns_ = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    if (m.size_ > 0) {
        void* p = ::mmap(nullptr, m.size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            raise_errno(err, "cannot map " + path, path);
        }
        m.data_ = static_cast<std::byte*>(p);
    }
    ::close(fd);  // the mapping holds the file
    return m;
}

mapped_file::~mapped_file() {
    if (data_) ::munmap(data_, size_);
}

mapped_file::mapped_file(mapped_file&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)),
      device_(std::exchange(other.device_, 0)),
      inode_(std::exchange(other.inode_, 0)),
      mtime_ns_(std::exchange(other.mtime_ns_, 0)) {}

mapped_file& mapped_file::operator=(mapped_file&& other) noexcept {
    if (this != &other) {
        if (data_) ::munmap(data_, size_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        path_ = std::move(other.path_);
        device_ = std::exchange(other.device_, 0);
        inode_ = std::exchange(other.inode_, 0);
        mtime_ns_ = std::exchange(other.mtime_ns_, 0);
    }
    return *this;
}

std::uint64_t mapped_file::resident_bytes(mapped_range r) const {
    check_range(r.offset, r.length, size_, path_);
    if (r.length == 0) return 0;
    const std::uint64_t b = r.offset / page * page;
    const std::uint64_t e = (r.offset + r.length + page - 1) / page * page;
    const mapped_range whole{b, e - b};
    if (const long long pages = cached_pages_of(path_, device_, inode_, {&whole, 1}); pages >= 0)
        return std::min(r.length, static_cast<std::uint64_t>(pages) * page);
    std::vector<unsigned char> vec((e - b) / page);
    if (::mincore(data_ + b, e - b, vec.data()) != 0) raise_errno(errno, "mincore of " + path_, path_);
    std::uint64_t pages = 0;
    for (auto v : vec) pages += v & 1;
    return std::min(r.length, pages * page);
}

void mapped_file::will_need(mapped_range r) const noexcept {
    if (r.offset >= size_ || r.length == 0) return;
    const std::uint64_t b = r.offset / page * page;
    const std::uint64_t e = std::min(size_, r.offset + r.length);
    ::madvise(data_ + b, e - b, MADV_WILLNEED);
}

populate_stats mapped_file::populate(std::span<const mapped_range> ranges, unsigned threads,
                                     const read_control& ctl) const {
    populate_stats stats;
    for (const auto& r : ranges) {
        check_range(r.offset, r.length, size_, path_);
        stats.bytes += r.length;
    }
    const std::vector<chunk> chunks = chunks_of(ranges, (size_ + page - 1) / page * page);
    std::uint64_t total = 0, mapped = 0;
    for (const auto& c : chunks) total += c.payload, mapped += c.end - c.begin;
    // Every page cached (one cachestat per range, for a few chunks or more):
    // no chunk is sampled.
    const bool hot = chunks.size() >= 4 && all_cached(path_, device_, inode_, ranges);
    if (threads == 0) {
        // Hot chunks are CPU work (page tables): one thread per core. Cold ones
        // wait on the disk: more requests in flight pay off (bench/README.md,
        // "Mapped files").
        bool cold = false;
        for (std::size_t i = 0; i < chunks.size() && !cold && !hot; i += std::max<std::size_t>(1, chunks.size() / 8))
            cold = !looks_resident(data_ + chunks[i].begin, chunks[i].end - chunks[i].begin);
        threads = std::clamp(std::thread::hardware_concurrency(), 2u, 8u);
        if (cold) threads = std::max(threads, 8u);
        if (!cold && mapped < hot_inline_bytes) threads = 1;
    }
    threads = static_cast<unsigned>(std::min<std::uint64_t>(threads, chunks.size()));
    if (mapped < inline_bytes) threads = std::min(threads, 1u);
    stats.threads = threads;

    std::atomic<std::uint64_t> cold{0};
    share_out(chunks.size(), threads, ctl, total, "loading " + path_ + " was cancelled", [&](std::size_t i) {
        const chunk c = chunks[i];
        std::byte* p = data_ + c.begin;
        const std::uint64_t n = c.end - c.begin;
        const std::uint64_t last = n - page;
        if (hot || looks_resident(p, n)) {
            // The last page first: a file that shrank fails here (EFAULT), not
            // with SIGBUS in the reads below.
            if (!populate_read(p + last, page, path_, c.begin + last)) {
                touch_pages(p, n, page);  // a kernel without MADV_POPULATE_READ
            } else {
                touch_pages(p, n, file::fault_around_bytes);
            }
        } else {
            cold.fetch_add(n, std::memory_order_relaxed);
            // Then one read per page, here on the pool (see first_access); a
            // kernel without MADV_POPULATE_READ faults them in by those reads.
            (void)populate_read(p, n, path_, c.begin);
            first_access(p, n);
        }
        return c.payload;
    });
    stats.cold_bytes = std::min(cold.load(), stats.bytes);
    return stats;
}

populate_stats mapped_file::copy_to(std::span<const mapped_copy> copies, unsigned threads,
                                    const read_control& ctl) const {
    populate_stats stats;
    for (const auto& c : copies) {
        check_range(c.offset, c.length, size_, path_);
        if (c.length != 0 && c.dst == nullptr)
            raise(errc::InvalidArgument, "copying " + std::to_string(c.length) + " bytes of " + path_ +
                                             " at offset " + std::to_string(c.offset) + " to a null destination");
        stats.bytes += c.length;
    }
    struct piece {
        std::uint64_t offset, length;
        std::byte* dst;
    };
    std::vector<piece> pieces;
    for (const auto& c : copies) {
        for (std::uint64_t o = c.offset; o < c.offset + c.length;) {
            const std::uint64_t e = std::min(c.offset + c.length, (o / copy_piece_bytes + 1) * copy_piece_bytes);
            pieces.push_back({o, e - o, c.dst + (o - c.offset)});
            o = e;
        }
    }
    std::vector<mapped_range> spans;
    for (const auto& c : copies) spans.push_back({c.offset, c.length});
    const bool hot = pieces.size() >= 4 && all_cached(path_, device_, inode_, spans);  // then no piece is sampled
    if (threads == 0) {
        // A cached piece is a copy (CPU and memory bandwidth): one thread per
        // core. Pieces not cached wait on the disk first (as populate()).
        bool cold = false;
        for (std::size_t i = 0; i < pieces.size() && !cold && !hot; i += std::max<std::size_t>(1, pieces.size() / 8)) {
            const std::uint64_t b = pieces[i].offset / page * page;
            cold = !looks_resident(data_ + b, pieces[i].offset + pieces[i].length - b);
        }
        threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
        if (cold) threads = std::max(threads, 8u);
    }
    threads = static_cast<unsigned>(std::min<std::uint64_t>(threads, pieces.size()));
    if (stats.bytes < copy_inline_bytes) threads = std::min(threads, 1u);
    stats.threads = threads;

    const std::uint64_t mapped_end = (size_ + page - 1) / page * page;
    std::atomic<std::uint64_t> cold{0};
    share_out(pieces.size(), threads, ctl, stats.bytes, "copying from " + path_ + " was cancelled", [&](std::size_t i) {
        const piece& c = pieces[i];
        const std::uint64_t b = c.offset / page * page;
        const std::uint64_t e = std::min(mapped_end, (c.offset + c.length + page - 1) / page * page);
        if (hot || looks_resident(data_ + b, e - b)) {
            // The last page first: a file that shrank fails here (Truncated), not
            // with SIGBUS in the copy. The copy's own faults map the rest.
            (void)populate_read(data_ + e - page, page, path_, e - page);
        } else {
            // Read in by MADV_POPULATE_READ (the kernel's readahead), then copied.
            cold.fetch_add(c.length, std::memory_order_relaxed);
            (void)populate_read(data_ + b, e - b, path_, b);
        }
        stream_copy(c.dst, data_ + c.offset, c.length);
        return c.length;
    });
    stats.cold_bytes = std::min(cold.load(), stats.bytes);
    return stats;
}

}  // namespace ringsafe
