// Baseline readers for bench_read.
#include "read_baselines.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace ringsafe::bench {
namespace {

using clock_type = std::chrono::steady_clock;
double since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

struct piece {
    std::uint64_t offset, length;
    std::byte* dst;
};

std::vector<piece> pieces_of(const std::vector<copy_range>& ranges, std::uint64_t size) {
    std::vector<piece> out;
    for (const auto& r : ranges)
        for (std::uint64_t p = 0; p < r.length; p += size)
            out.push_back({r.offset + p, std::min(size, r.length - p), r.dst + p});
    return out;
}

// Runs fn(piece) over the pieces on `threads` threads sharing a cursor.
template <class Fn>
void parallel_pieces(const std::vector<piece>& ps, unsigned threads, Fn fn) {
    std::atomic<std::size_t> next{0};
    auto work = [&] {
        for (std::size_t i; (i = next.fetch_add(1)) < ps.size();) fn(ps[i]);
    };
    std::vector<std::thread> ts;
    for (unsigned t = 1; t < threads; ++t) ts.emplace_back(work);
    work();
    for (auto& t : ts) t.join();
}

int open_or_throw(const std::string& path, int flags) {
    int fd = ::open(path.c_str(), flags);
    if (fd < 0) throw std::runtime_error("open " + path + ": " + std::strerror(errno));
    return fd;
}

}  // namespace

double pread_loop(const std::string& path, const std::vector<copy_range>& ranges, unsigned threads) {
    const auto ps = pieces_of(ranges, 4u << 20);
    auto t0 = clock_type::now();
    int fd = open_or_throw(path, O_RDONLY);
    parallel_pieces(ps, threads, [&](const piece& p) {
        for (std::uint64_t done = 0; done < p.length;) {
            ssize_t n = ::pread(fd, p.dst + done, p.length - done, static_cast<off_t>(p.offset + done));
            if (n <= 0) throw std::runtime_error("pread failed");
            done += static_cast<std::uint64_t>(n);
        }
    });
    ::close(fd);
    return since(t0);
}

double mmap_memcpy(const std::string& path, const std::vector<copy_range>& ranges, unsigned threads) {
    const auto ps = pieces_of(ranges, 4u << 20);
    auto t0 = clock_type::now();
    int fd = open_or_throw(path, O_RDONLY);
    const off_t size = ::lseek(fd, 0, SEEK_END);
    void* m = ::mmap(nullptr, static_cast<std::size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) throw std::runtime_error("mmap failed");
    auto* base = static_cast<const std::byte*>(m);
    parallel_pieces(ps, threads, [&](const piece& p) { std::memcpy(p.dst, base + p.offset, p.length); });
    ::munmap(m, static_cast<std::size_t>(size));
    ::close(fd);
    return since(t0);
}

double uring_loop(const std::string& path, const std::vector<copy_range>& ranges, bool direct, std::byte* arena,
                  std::size_t arena_size) {
    // Merge ranges adjacent in the file and in memory, as any sensible loop would.
    std::vector<copy_range> covers;
    for (const auto& r : ranges) {
        if (r.length == 0) continue;
        if (!covers.empty() && covers.back().offset + covers.back().length == r.offset &&
            covers.back().dst + covers.back().length == r.dst)
            covers.back().length += r.length;
        else
            covers.push_back(r);
    }
    if (direct) {
        for (auto& r : covers) {
            const std::uint64_t head = r.offset % 4096;
            r.offset -= head, r.dst -= head;
            r.length = (r.length + head + 4095) / 4096 * 4096;
        }
    }
    // 1 MiB pieces, also cut where a registered 1 GiB arena slice ends.
    std::vector<piece> ps;
    const std::uint64_t gib = 1ull << 30;
    for (const auto& p : pieces_of(covers, 1u << 20)) {
        const std::uint64_t a = static_cast<std::uint64_t>(p.dst - arena);
        const std::uint64_t cut = std::min(p.length, (a / gib + 1) * gib - a);
        ps.push_back({p.offset, cut, p.dst});
        if (cut < p.length) ps.push_back({p.offset + cut, p.length - cut, p.dst + cut});
    }
    io_uring ring;
    if (io_uring_queue_init(32, &ring, 0) < 0) throw std::runtime_error("io_uring_queue_init");
    std::vector<iovec> iov;
    if (direct)
        for (std::size_t a = 0; a < arena_size; a += gib) iov.push_back({arena + a, std::min<std::size_t>(gib, arena_size - a)});
    if (direct && io_uring_register_buffers(&ring, iov.data(), static_cast<unsigned>(iov.size())) < 0)
        throw std::runtime_error("io_uring_register_buffers");
    auto t0 = clock_type::now();
    int fd = open_or_throw(path, O_RDONLY | (direct ? O_DIRECT : 0));
    io_uring_register_files(&ring, &fd, 1);
    std::size_t next = 0, inflight = 0;
    while (next < ps.size() || inflight) {
        while (inflight < 32 && next < ps.size()) {
            const piece& p = ps[next];
            io_uring_sqe* sqe = io_uring_get_sqe(&ring);
            const auto buf_index = static_cast<int>(static_cast<std::uint64_t>(p.dst - arena) / gib);
            if (direct)
                io_uring_prep_read_fixed(sqe, 0, p.dst, static_cast<unsigned>(p.length), p.offset, buf_index);
            else
                io_uring_prep_read(sqe, 0, p.dst, static_cast<unsigned>(p.length), p.offset);
            sqe->flags |= IOSQE_FIXED_FILE;
            io_uring_sqe_set_data64(sqe, next);
            ++next, ++inflight;
        }
        io_uring_submit_and_wait(&ring, 1);
        io_uring_cqe* cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            ++seen;
            // The loop is a ceiling, not a reader: short reads happen only at EOF here.
            if (cqe->res < 0) throw std::runtime_error(std::string("uring_loop read: ") + std::strerror(-cqe->res));
        }
        io_uring_cq_advance(&ring, seen);
        inflight -= seen;
    }
    const double s = since(t0);
    io_uring_queue_exit(&ring);
    ::close(fd);
    return s;
}

double memcpy_ranges(const std::byte* src, std::uint64_t src_base, const std::vector<copy_range>& ranges,
                     unsigned threads) {
    const auto ps = pieces_of(ranges, 4u << 20);
    auto t0 = clock_type::now();
    parallel_pieces(ps, threads, [&](const piece& p) { std::memcpy(p.dst, src + (p.offset - src_base), p.length); });
    return since(t0);
}

void drop_cache(const std::string& path) {
    int fd = open_or_throw(path, O_RDONLY);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

fio_result run_fio(const std::string& path, std::uint64_t size, bool direct, bool hot, unsigned jobs) {
    fio_result r;
    if (std::system("command -v fio >/dev/null 2>&1") != 0) {
        r.what = "fio not installed (apt-get install fio)";
        return r;
    }
    const std::uint64_t part = size / jobs / (1u << 20) * (1u << 20);
    std::string cmd = "fio --name=bench --filename=" + path +
                      " --rw=read --bs=1M --ioengine=io_uring --iodepth=32 --numjobs=" + std::to_string(jobs) +
                      " --size=" + std::to_string(part) + " --offset_increment=" + std::to_string(part) +
                      " --group_reporting --output-format=json";
    if (hot) cmd += " --invalidate=0";
    if (direct) cmd += " --direct=1 --nonvectored=1 --fixedbufs --registerfiles";
    r.what = cmd;
    std::FILE* p = ::popen((cmd + " 2>/dev/null").c_str(), "r");
    if (!p) return r;
    std::string out;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    ::pclose(p);
    try {
        auto v = boost::json::parse(out.substr(out.find('{')));
        const auto& job = v.at("jobs").as_array().at(0);
        r.gbps = static_cast<double>(job.at("read").at("bw_bytes").to_number<double>()) / 1e9;
        r.ran = true;
    } catch (const std::exception& e) {
        r.what += std::string(" (unparsable output: ") + e.what() + ")";
    }
    return r;
}

}  // namespace ringsafe::bench
