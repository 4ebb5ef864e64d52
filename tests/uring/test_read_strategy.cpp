// How the io_uring executor shapes buffered reads (file_options::mode): the
// chunk_queue that gives each ring a sequential stream, the page-cache probe
// that picks hot or cold per execute(), and how many rings a plan starts.
// Engine-internal parts are tested directly; the rest through open_file and
// the completion hook (which says which ring read what, and whether with
// IOSQE_ASYNC).
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "file/page_cache_probe.hpp"
#include "ringsafe/buffer.hpp"
#include "ringsafe/file_source.hpp"
#include "skip.hpp"
#include "test_support.hpp"
#include "uring/chunk_queue.hpp"
#include "uring/fault_injection.hpp"
#include "uring/read_worker.hpp"

using namespace ringsafe;
using ringsafe::test::temp_dir;
using mode = file_options::buffered_mode;

namespace {

constexpr std::uint64_t seed = 11;

std::vector<uring::read_chunk> equal_chunks(std::size_t n, std::uint64_t size = 4096) {
    std::vector<uring::read_chunk> c(n);
    for (std::size_t i = 0; i < n; ++i) c[i] = {i * size, size, nullptr, i};
    return c;
}

// A pattern file written, fsynced and (with `evict`) dropped from the page cache.
struct data_file {
    temp_dir dir;
    std::string path;
    std::vector<std::byte> bytes;
    data_file(std::size_t size, bool evict) : path((dir / "data.bin").string()), bytes(size) {
        test::fill_pattern(bytes, seed);
        test::write_file(path, bytes);
        const int fd = ::open(path.c_str(), O_RDONLY);
        REQUIRE(fd >= 0);
        ::fsync(fd);
        if (evict) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
    // Pages of the file in the page cache, by mincore() over a mapping (not by
    // the code under test).
    std::size_t resident_pages() const {
        const int fd = ::open(path.c_str(), O_RDONLY);
        void* m = ::mmap(nullptr, bytes.size(), PROT_READ, MAP_SHARED, fd, 0);
        ::close(fd);
        if (m == MAP_FAILED) return 0;
        const long page = ::sysconf(_SC_PAGESIZE);
        std::vector<unsigned char> v((bytes.size() + page - 1) / page);
        std::size_t n = 0;
        if (::mincore(m, bytes.size(), v.data()) == 0)
            for (unsigned char c : v) n += c & 1;
        ::munmap(m, bytes.size());
        return n;
    }
};

// What the completion hook saw during one execute().
struct completions {
    std::chrono::microseconds delay{0};  // slows each completion down (so every ring gets to run)
    std::mutex m;
    std::vector<uring::completion_event> seen;
    uring::scoped_completion_fault hook{[this](const uring::completion_event& ev, int res) {
        if (delay.count()) std::this_thread::sleep_for(delay);
        std::lock_guard lock(m);
        seen.push_back(ev);
        return res;
    }};
    std::size_t punted() {
        return static_cast<std::size_t>(std::count_if(seen.begin(), seen.end(), [](auto& e) { return e.punted; }));
    }
    unsigned max_ring() {
        unsigned r = 0;
        for (auto& e : seen) r = std::max(r, e.ring);
        return r;
    }
};

file_options with(mode m, unsigned threads, std::uint64_t chunk) {
    file_options o;
    o.mode = m;
    o.threads = threads;
    o.chunk_size = chunk;
    return o;
}

}  // namespace

TEST_CASE("chunk_queue: streams split by bytes, claim in order, steal the upper half") {
    uring::chunk_queue q;
    auto chunks = equal_chunks(100);
    q.split(chunks, 2);
    // Worker 0 owns 0..49 and reads them front to back.
    for (std::size_t i = 0; i < 10; ++i) CHECK(q.claim(0) == i);
    // Worker 1 owns 50..99.
    for (std::size_t i = 50; i < 100; ++i) REQUIRE(q.claim(1) == i);
    // Worker 1 is done: it takes the upper half (30..49) of worker 0's remaining 10..49.
    CHECK(q.claim(1) == 30);
    CHECK(q.claim(1) == 31);
    // Worker 0 keeps its lower half in order.
    CHECK(q.claim(0) == 10);
    std::vector<std::size_t> rest;
    for (std::size_t c; (c = q.claim(0)) != uring::chunk_queue::none;) rest.push_back(c);
    for (std::size_t c; (c = q.claim(1)) != uring::chunk_queue::none;) rest.push_back(c);
    std::sort(rest.begin(), rest.end());
    std::vector<std::size_t> want;
    for (std::size_t i = 11; i < 30; ++i) want.push_back(i);
    for (std::size_t i = 32; i < 50; ++i) want.push_back(i);
    CHECK(rest == want);
}

TEST_CASE("chunk_queue: shares follow bytes, not counts; a lone last chunk is taken over") {
    uring::chunk_queue q;
    // One 40 KiB chunk then ten 4 KiB ones: worker 0's half of the bytes is the big one alone.
    std::vector<uring::read_chunk> c = equal_chunks(11);
    c[0].length = 40960;
    q.split(c, 2);
    CHECK(q.claim(0) == 0);
    CHECK(q.claim(1) == 1);
    // A worker that never starts loses nothing: the other one ends up with all of it.
    uring::chunk_queue lone;
    lone.split(equal_chunks(3), 3);  // one chunk per worker; workers 1 and 2 never run
    std::vector<std::size_t> got;
    for (std::size_t x; (x = lone.claim(0)) != uring::chunk_queue::none;) got.push_back(x);
    std::sort(got.begin(), got.end());
    CHECK(got == std::vector<std::size_t>{0, 1, 2});
}

TEST_CASE("chunk_queue: concurrent claims hand out every chunk exactly once") {
    for (bool streams : {false, true}) {
        uring::chunk_queue q;
        auto chunks = equal_chunks(20000);
        if (streams) q.split(chunks, 4);
        else q.share(chunks.size());
        std::vector<std::atomic<int>> hits(chunks.size());
        std::vector<std::thread> ts;
        for (std::size_t w = 0; w < 4; ++w)
            ts.emplace_back([&, w] {
                for (std::size_t c; (c = q.claim(w)) != uring::chunk_queue::none;) ++hits[c];
            });
        for (auto& t : ts) t.join();
        INFO("streams " << streams);
        CHECK(std::all_of(hits.begin(), hits.end(), [](auto& h) { return h.load() == 1; }));
    }
}

TEST_CASE("cached_fraction tells a cached file from an evicted one") {
    data_file f(8u << 20, false);
    const int fd = ::open(f.path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    std::vector<read_op> ops;
    for (std::uint64_t off = 0; off < f.bytes.size(); off += 1u << 20) ops.push_back({off + 100, 500000, nullptr, 0});
    CHECK(file::cached_fraction(fd, ops) > 0.99);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (f.resident_pages() > 16) {
        ::close(fd);
        SKIP("POSIX_FADV_DONTNEED does not evict on this filesystem: the cold half is not checked");
    }
    CHECK(file::cached_fraction(fd, ops) < 0.01);
    CHECK(file::cached_fraction(fd, {}) == 1.0);  // nothing to read counts as hot
    ::close(fd);
}

TEST_CASE("automatic mode reads an evicted file as cold streams and a cached one hot") {
    data_file f(6u << 20, true);
    if (f.resident_pages() > 16) {
        SKIP("POSIX_FADV_DONTNEED does not evict on this filesystem");
    }
    auto src = open_file(f.path, with(mode::automatic, 2, 256u << 10));
    host_buffer buf(f.bytes.size());
    std::vector<read_op> ops{{0, f.bytes.size(), buf.data(), 0}};
    {
        completions c;
        src->execute(ops, {});
        CHECK(c.punted() == 0);  // cold: no IOSQE_ASYNC
        CHECK(c.seen.size() >= 24);
    }
    REQUIRE(std::memcmp(buf.data(), f.bytes.data(), f.bytes.size()) == 0);
    std::memset(buf.data(), 0, buf.size());
    {
        completions c;
        src->execute(ops, {});  // now cached: hot, punted to io-wq
        CHECK(c.punted() == c.seen.size());
    }
    CHECK(std::memcmp(buf.data(), f.bytes.data(), f.bytes.size()) == 0);
}

TEST_CASE("cold mode: each ring reads a contiguous share in file order") {
    data_file f(4u << 20, false);
    auto src = open_file(f.path, with(mode::cold, 2, 65536));
    host_buffer buf(f.bytes.size());
    std::vector<read_op> ops{{0, f.bytes.size(), buf.data(), 0}};
    completions c;
    c.delay = std::chrono::milliseconds(1);  // 64 reads: both rings are surely running
    src->execute(ops, {});
    REQUIRE(std::memcmp(buf.data(), f.bytes.data(), f.bytes.size()) == 0);
    CHECK(c.punted() == 0);
    REQUIRE(c.max_ring() == 1);
    // Ring 1 starts at its own share, the upper half of the bytes (a shared
    // cursor would hand it the third or fourth chunk); ring 0 starts at 0.
    std::vector<std::uint64_t> offs[2];
    for (auto& e : c.seen) offs[e.ring].push_back(e.file_offset);
    REQUIRE(offs[0].size() >= 2);
    REQUIRE(offs[1].size() >= 2);
    CHECK(std::min(offs[0][0], offs[0][1]) == 0);
    CHECK(std::min(offs[1][0], offs[1][1]) == (2u << 20));
    // Per ring, the offsets form few ascending runs: its share, plus one run
    // per half it took over (two reads in flight may complete out of order).
    for (auto& o : offs) {
        std::size_t descents = 0;
        for (std::size_t i = 1; i < o.size(); ++i) descents += o[i] < o[i - 1];
        CHECK(descents <= 2 + o.size() / 4);
    }
}

// Open descriptors of this process that refer to `path` (a buffered ring
// after the first opens its own; see file_options::mode).
std::size_t descriptors_on(const std::string& path) {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (std::filesystem::read_symlink(e.path(), ec) == path) ++n;
    }
    return n;
}

TEST_CASE("hot punted reads run on the calling thread's ring alone; rings are kept across calls") {
    data_file f(8u << 20, false);
    const std::string path = std::filesystem::canonical(f.path).string();
    auto src = open_file(f.path, with(mode::hot, 4, 65536));  // async_punt on (default), depth 32
    host_buffer buf(f.bytes.size());
    std::vector<read_op> small{{0, 20 * 65536, buf.data(), 0}};  // 20 chunks
    std::vector<read_op> big{{0, f.bytes.size(), buf.data(), 0}};  // 128 chunks: four queues' worth
    for (auto* ops : {&small, &big, &small}) {
        std::memset(buf.data(), 0, buf.size());
        completions c;
        src->execute(*ops, {});
        CHECK(c.max_ring() == 0);
        CHECK(c.punted() == c.seen.size());
        CHECK(descriptors_on(path) == 1);  // rings 1..3 were never made
        CHECK(std::memcmp(buf.data(), f.bytes.data(), (*ops)[0].length) == 0);
    }
    // Without async_punt the copies happen on the submitting threads: every
    // ring runs, each on its own share, and stays for the next call.
    file_options inline_copies = with(mode::hot, 2, 65536);
    inline_copies.async_punt = false;
    auto src2 = open_file(f.path, inline_copies);
    for (int round = 0; round < 2; ++round) {
        std::memset(buf.data(), 0, buf.size());
        completions c;
        c.delay = std::chrono::microseconds(200);  // 128 reads: both rings surely run
        src2->execute(big, {});
        CHECK(c.punted() == 0);
        CHECK(c.max_ring() == 1);
        CHECK(descriptors_on(path) == 1 + 2);  // src2's own, and its ring 1's
        CHECK(std::memcmp(buf.data(), f.bytes.data(), f.bytes.size()) == 0);
    }
}
