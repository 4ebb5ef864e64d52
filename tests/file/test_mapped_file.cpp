// Tests for include/ringsafe/mapped_file.hpp: mapping, populate() over cached
// and evicted ranges, bounds, progress, cancellation, a file that shrank under
// the mapping, private (copy-on-write) writes, and the identity and
// modification time recorded at mapping, which a reader of the same file
// records too (what a loader compares before it uses a mapping).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <vector>

#include <sys/stat.h>

#include "ringsafe/error.hpp"
#include "ringsafe/mapped_file.hpp"
#include "ringsafe/reader.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
    std::vector<std::byte> v(n);
    fill_pattern(v, seed);
    return v;
}

void evict(const std::filesystem::path& p) {
    const int fd = ::open(p.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    ::fsync(fd);  // dirty pages are not dropped
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
}

}  // namespace

TEST_CASE("mapped_file maps the whole file and populate makes ranges resident") {
    temp_dir dir;
    const auto data = pattern((48u << 20) + 123, 7);  // several chunks and a partial last page
    write_file(dir / "f", data);
    for (bool cold : {false, true}) {
        if (cold) evict(dir / "f");
        auto m = mapped_file::open((dir / "f").string());
        REQUIRE(m.size() == data.size());
        const std::vector<mapped_range> ranges{{100, 20u << 20}, {(20u << 20) + 100, data.size() - (20u << 20) - 100}};
        std::atomic<std::uint64_t> last{0}, total{0};
        read_control ctl;
        ctl.on_progress = [&](std::uint64_t d, std::uint64_t t) {
            last = std::max<std::uint64_t>(last, d);
            total = t;
        };
        auto st = m.populate(ranges, 0, ctl);
        CHECK(st.bytes == data.size() - 100);
        CHECK(last == data.size() - 100);  // progress counts the caller's bytes, not pages
        CHECK(total == data.size() - 100);
        if (cold) CHECK(st.threads > 2);  // more requests in flight than cores (one thread per 8 MiB chunk, up to 8)
        else CHECK(st.threads == 1);      // cached and under 64 MiB: the calling thread alone
        CHECK(m.resident_bytes({0, m.size()}) == m.size());
        CHECK(std::memcmp(m.data(), data.data(), data.size()) == 0);
    }
}

TEST_CASE("mapped_file writes stay private to the mapping") {
    temp_dir dir;
    const auto data = pattern(10000, 3);
    write_file(dir / "f", data);
    {
        auto m = mapped_file::open((dir / "f").string());
        std::memset(m.data(), 0, 100);
        auto again = mapped_file::open((dir / "f").string());
        CHECK(std::memcmp(again.data(), data.data(), data.size()) == 0);
    }
    CHECK(read_file(dir / "f") == data);
}

TEST_CASE("mapped_file keeps the old bytes after the path is replaced") {
    temp_dir dir;
    const auto old_bytes = pattern(1u << 20, 1), new_bytes = pattern(1u << 20, 2);
    write_file(dir / "f", old_bytes);
    auto m = mapped_file::open((dir / "f").string());
    write_file(dir / "g", new_bytes);
    std::filesystem::rename(dir / "g", dir / "f");
    const std::vector<mapped_range> all{{0, m.size()}};
    m.populate(all);
    CHECK(std::memcmp(m.data(), old_bytes.data(), old_bytes.size()) == 0);
}

TEST_CASE("mapped_file and the reader record the file's identity and modification time as opened") {
    temp_dir dir;
    const auto path = (dir / "m.safetensors").string();
    const std::string header = R"({"w":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}})";
    std::vector<std::byte> bytes(8 + header.size() + 16, std::byte{7});
    const std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<std::byte>((n >> (8 * i)) & 0xff);
    std::memcpy(bytes.data() + 8, header.data(), header.size());
    write_file(path, bytes);
    struct timespec times[2] = {{0, UTIME_OMIT}, {1'700'000'000, 123'456'789}};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
    const std::int64_t then = 1'700'000'000LL * 1'000'000'000 + 123'456'789;
    auto r = reader::open(path);
    auto m = mapped_file::open(path);
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    CHECK(r.shards()[0].mtime_ns == then);
    CHECK(m.mtime_ns() == then);
    CHECK(r.shards()[0].device == m.device());
    CHECK(r.shards()[0].inode == m.inode());
    CHECK(m.inode() == static_cast<std::uint64_t>(st.st_ino));
    // A rewrite in place keeps the identity and changes the time: what was recorded stays.
    times[1] = {1'700'000'001, 0};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
    auto again = mapped_file::open(path);
    CHECK(again.inode() == m.inode());
    CHECK(again.mtime_ns() == 1'700'000'001LL * 1'000'000'000);
    CHECK(m.mtime_ns() == then);
    CHECK(r.shards()[0].mtime_ns == then);
}

TEST_CASE("mapped_file refuses ranges past the end, missing files and directories") {
    temp_dir dir;
    write_file(dir / "f", pattern(5000, 1));
    auto m = mapped_file::open((dir / "f").string());
    const std::vector<mapped_range> past{{4000, 1001}};
    CHECK_THAT(kind_of([&] { m.populate(past); }), Catch::Contains("InvalidArgument") && Catch::Contains("past the end"));
    CHECK_THROWS_AS(m.resident_bytes({5001, 0}), ringsafe::error);
    try {
        mapped_file::open((dir / "missing").string());
        FAIL("no error");
    } catch (const ringsafe::error& e) {
        CHECK(e.code() == std::errc::no_such_file_or_directory);
        CHECK(e.path() == (dir / "missing").string());
    }
    CHECK_THROWS_AS(mapped_file::open(dir.path().string()), ringsafe::error);
    write_file(dir / "empty", std::string());
    auto e = mapped_file::open((dir / "empty").string());
    CHECK(e.size() == 0);
    CHECK(e.populate({}).bytes == 0);
}

TEST_CASE("mapped_file populate reports a file that shrank instead of faulting") {
    temp_dir dir;
    write_file(dir / "f", pattern(16u << 20, 4));
    auto m = mapped_file::open((dir / "f").string());
    REQUIRE(::truncate((dir / "f").c_str(), 4096) == 0);
    const std::vector<mapped_range> all{{0, m.size()}};
    CHECK_THAT(kind_of([&] { m.populate(all, 1); }), Catch::Contains("Truncated") && Catch::Contains("shorter"));
}

TEST_CASE("mapped_file populate stops when cancelled") {
    temp_dir dir;
    write_file(dir / "f", pattern(64u << 20, 5));
    auto m = mapped_file::open((dir / "f").string());
    std::atomic<bool> cancel{true};
    read_control ctl;
    ctl.cancel = &cancel;
    const std::vector<mapped_range> all{{0, m.size()}};
    CHECK_THAT(kind_of([&] { m.populate(all, 2, ctl); }), Catch::Contains("Cancelled"));
}

TEST_CASE("mapped_file copy_to copies exact bytes, cached or evicted, on any thread count") {
    temp_dir dir;
    const auto data = pattern((21u << 20) + 4321, 11);  // several 4 MiB pieces and a partial last page
    write_file(dir / "f", data);
    // Ranges not aligned to pages or pieces, one crossing several pieces, one empty.
    const std::vector<std::pair<std::uint64_t, std::uint64_t>> want{
        {3, 5000}, {(4u << 20) - 7, (9u << 20) + 13}, {777, 0}, {data.size() - 4000, 4000}, {1u << 20, 1}};
    for (bool cold : {false, true})
        for (unsigned threads : {0u, 1u, 3u}) {
            if (cold) evict(dir / "f");
            auto m = mapped_file::open((dir / "f").string());
            std::vector<std::vector<std::byte>> dsts;
            std::vector<mapped_copy> copies;
            for (auto [off, len] : want) {
                dsts.emplace_back(len + 2, std::byte{0x5a});  // a guard byte after each destination
                copies.push_back({off, len, dsts.back().data() + 1});
            }
            std::atomic<std::uint64_t> last{0}, total{0};
            read_control ctl;
            ctl.on_progress = [&](std::uint64_t d, std::uint64_t t) {
                last = std::max<std::uint64_t>(last, d);
                total = t;
            };
            const auto st = m.copy_to(copies, threads, ctl);
            std::uint64_t bytes = 0;
            for (std::size_t i = 0; i < want.size(); ++i) {
                const auto [off, len] = want[i];
                bytes += len;
                CHECK(dsts[i].front() == std::byte{0x5a});  // nothing written outside a destination
                CHECK(dsts[i].back() == std::byte{0x5a});
                CHECK(std::memcmp(dsts[i].data() + 1, data.data() + off, len) == 0);
            }
            CHECK(st.bytes == bytes);
            CHECK(last == bytes);
            CHECK(total == bytes);
            if (cold) CHECK(st.cold_bytes > 0);  // read in by MADV_POPULATE_READ before the copy
            else CHECK(st.cold_bytes == 0);
            if (threads == 0) CHECK(st.threads >= 1);
            else CHECK(st.threads == threads);
        }
}

TEST_CASE("mapped_file copy_to copies small totals on the calling thread") {
    temp_dir dir;
    write_file(dir / "f", pattern(1u << 20, 12));
    auto m = mapped_file::open((dir / "f").string());
    std::vector<std::byte> dst(100000);
    const std::vector<mapped_copy> one{{10, dst.size(), dst.data()}};
    CHECK(m.copy_to(one).threads == 1);
    CHECK(m.copy_to({}).bytes == 0);
}

TEST_CASE("mapped_file copy_to refuses ranges past the end and null destinations") {
    temp_dir dir;
    write_file(dir / "f", pattern(5000, 1));
    auto m = mapped_file::open((dir / "f").string());
    std::vector<std::byte> dst(2000, std::byte{0x33});
    const std::vector<mapped_copy> past{{0, 10, dst.data()}, {4000, 1001, dst.data()}};
    CHECK_THAT(kind_of([&] { m.copy_to(past); }), Catch::Contains("InvalidArgument") && Catch::Contains("past the end"));
    CHECK(dst[0] == std::byte{0x33});  // every range is checked before any byte moves
    const std::vector<mapped_copy> null_dst{{0, 10, nullptr}};
    CHECK_THAT(kind_of([&] { m.copy_to(null_dst); }), Catch::Contains("InvalidArgument") && Catch::Contains("null"));
    const std::vector<mapped_copy> empty_null{{5000, 0, nullptr}};
    CHECK(m.copy_to(empty_null).bytes == 0);
}

TEST_CASE("mapped_file copy_to reports a file that shrank instead of faulting") {
    temp_dir dir;
    write_file(dir / "f", pattern(16u << 20, 4));
    auto m = mapped_file::open((dir / "f").string());
    REQUIRE(::truncate((dir / "f").c_str(), 4096) == 0);
    std::vector<std::byte> dst(m.size());
    const std::vector<mapped_copy> all{{0, m.size(), dst.data()}};
    for (unsigned threads : {1u, 2u})
        CHECK_THAT(kind_of([&] { m.copy_to(all, threads); }), Catch::Contains("Truncated") && Catch::Contains("shorter"));
}

TEST_CASE("mapped_file copy_to stops when cancelled") {
    temp_dir dir;
    write_file(dir / "f", pattern(64u << 20, 5));
    auto m = mapped_file::open((dir / "f").string());
    std::vector<std::byte> dst(m.size());
    std::atomic<bool> cancel{true};
    read_control ctl;
    ctl.cancel = &cancel;
    const std::vector<mapped_copy> all{{0, m.size(), dst.data()}};
    CHECK_THAT(kind_of([&] { m.copy_to(all, 2, ctl); }), Catch::Contains("Cancelled"));
}

TEST_CASE("mapped_file resident_bytes counts the mapped file's cached pages, not another file at its path") {
    temp_dir dir;
    const auto data = pattern(64u << 20, 6);  // well past the kernel's readahead of the first 4 MiB
    write_file(dir / "f", data);
    evict(dir / "f");
    auto m = mapped_file::open((dir / "f").string());
    CHECK(m.resident_bytes({0, m.size()}) < m.size() / 10);
    const std::vector<mapped_range> half{{0, 4u << 20}};
    m.populate(half, 1);
    const auto have = m.resident_bytes({0, m.size()});
    CHECK(have >= (4u << 20));
    CHECK(have < m.size());
    CHECK(m.resident_bytes({0, 4u << 20}) == (4u << 20));
    CHECK(m.resident_bytes({100, 1000}) == 1000);  // never more than the range
    // Another file at the path, cached whole: the mapping's file is still judged.
    write_file(dir / "g", pattern(64u << 20, 7));
    std::filesystem::rename(dir / "g", dir / "f");
    CHECK(m.resident_bytes({0, m.size()}) == have);
}
