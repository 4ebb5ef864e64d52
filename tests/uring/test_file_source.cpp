// Tests for include/ringsafe/file_source.hpp (and open_source's local branch):
// the io_uring executor against independently computed pattern bytes, with
// faults injected at the completion edge. Tests tagged [direct] use O_DIRECT;
// meson runs them as their own test, which exits 77 (skipped) only when the
// filesystem refuses O_DIRECT.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>

#include "ringsafe/buffer.hpp"
#include "ringsafe/file_source.hpp"
#include "ringsafe/open_source.hpp"
#include "skip.hpp"
#include "test_support.hpp"
#include "uring/fault_injection.hpp"

using namespace ringsafe;
using ringsafe::test::temp_dir;

namespace {

constexpr std::uint64_t seed = 7;
constexpr std::byte canary{0xA5};

// A file of `size` pattern bytes; `bytes` keeps them for comparison.
struct pattern_file {
    temp_dir dir;
    std::string path;
    std::vector<std::byte> bytes;
    explicit pattern_file(std::size_t size) : path((dir / "data.bin").string()), bytes(size) {
        test::fill_pattern(bytes, seed);
        test::write_file(path, bytes);
    }
};

// Random ops over a file of `file_size` bytes, each in its own region of one
// arena, at unaligned addresses (or, with `dio_friendly`, at addresses
// congruent to the file offset mod 4096), separated by canary bytes.
struct op_set {
    host_buffer arena;
    std::vector<read_op> ops;
    std::vector<std::size_t> at;  // arena offset of each op
    std::vector<std::atomic<std::uint64_t>> landed;

    op_set(std::uint64_t file_size, unsigned count, std::uint32_t rng_seed, bool dio_friendly)
        : landed(count + 2) {
        std::mt19937_64 rng(rng_seed);
        std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
        for (unsigned i = 0; i < count; ++i) {
            const std::uint64_t off = rng() % file_size;
            const unsigned k = static_cast<unsigned>(rng() % 4);
            const std::uint64_t cap = k == 0 ? 1 : k == 1 ? 5000 : k == 2 ? 70000 : 1600000;
            ranges.emplace_back(off, std::min<std::uint64_t>(rng() % (cap + 1), file_size - off));
        }
        ranges.emplace_back(0, file_size);                 // the whole file
        ranges.emplace_back(file_size - 777, 777);         // ends exactly at EOF
        std::size_t need = 0;
        for (auto& r : ranges) need += r.second + 2 * 4096 + 64;
        arena = host_buffer(need);
        std::memset(arena.data(), static_cast<int>(canary), arena.size());
        std::size_t cursor = 64;
        for (std::size_t i = 0; i < ranges.size(); ++i) {
            std::size_t pos = cursor + (dio_friendly ? 0 : static_cast<std::size_t>(rng() % 4096));
            if (dio_friendly) pos = (pos + 4095) / 4096 * 4096 + ranges[i].first % 4096;
            at.push_back(pos);
            ops.push_back({ranges[i].first, ranges[i].second, arena.data() + pos, static_cast<std::uint32_t>(i)});
            cursor = pos + ranges[i].second + 64;
        }
    }

    io_control control() {
        io_control c;
        c.on_bytes = [this](std::size_t op, std::uint64_t n) { landed[op] += n; };
        c.describe = [](std::uint32_t tag) { return "tensor #" + std::to_string(tag); };
        return c;
    }

    // Every op's bytes equal the file's, every gap still holds the canary, and
    // on_bytes reported exactly each op's length.
    void check(const std::vector<std::byte>& file) const {
        std::size_t prev_end = 0;
        for (std::size_t i = 0; i < ops.size(); ++i) {
            INFO("op " << i << " offset " << ops[i].offset << " length " << ops[i].length);
            REQUIRE(std::memcmp(arena.data() + at[i], file.data() + ops[i].offset, ops[i].length) == 0);
            REQUIRE(untouched(prev_end, at[i]));
            CHECK(landed[i].load() == ops[i].length);
            prev_end = at[i] + ops[i].length;
        }
        REQUIRE(untouched(prev_end, arena.size()));
    }

    bool untouched(std::size_t from, std::size_t to) const {
        for (std::size_t g = from; g < to; ++g)
            if (arena.data()[g] != canary) return false;
        return true;
    }
};

bool direct_refused(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
    if (fd >= 0) ::close(fd);
    return fd < 0 && errno == EINVAL;
}


file_options opts(unsigned qd, std::uint64_t chunk, unsigned threads, bool direct) {
    file_options o;
    o.queue_depth = qd;
    o.chunk_size = chunk;
    o.threads = threads;
    o.direct = direct;
    return o;
}

void random_ranges_across_options(bool direct) {
    pattern_file f((3u << 20) + 1234);
    if (direct && direct_refused(f.path)) SKIP("the filesystem refuses O_DIRECT");
    std::uint32_t round = 0;
    for (unsigned qd : {1u, 3u, 32u})
        for (std::uint64_t chunk : {std::uint64_t{4096}, std::uint64_t{65536}, std::uint64_t{1} << 20})
            for (unsigned threads : {1u, 2u, 3u})
                for (bool friendly : {false, true}) {
                    INFO("qd " << qd << " chunk " << chunk << " threads " << threads << " dio_friendly " << friendly);
                    file_options o = opts(qd, chunk, threads, direct);
                    o.register_buffers = (round % 2) == 0;
                    o.async_punt = (round / 2) % 2 == 0;
                    // Buffered: every read shape (the file is cached, so automatic picks hot).
                    o.mode = std::array{file_options::buffered_mode::automatic, file_options::buffered_mode::hot,
                                        file_options::buffered_mode::cold}[(round / 4) % 3];
                    INFO("mode " << static_cast<int>(o.mode) << " async_punt " << o.async_punt);
                    auto src = open_file(f.path, o);
                    const auto align = src->hints().alignment;
                    CHECK((direct ? align >= 512 && (align & (align - 1)) == 0 : align == 1));
                    op_set set(f.bytes.size(), 40, ++round, friendly);
                    src->execute(set.ops, set.control());
                    set.check(f.bytes);
                }
}

std::string what_of(const std::function<void()>& fn, std::error_code& ec) {
    try {
        fn();
    } catch (const error& e) {
        ec = e.code();
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("open_file reads the prefix with the size and names missing files") {
    pattern_file f(50000);  // smaller than the default prefetch (64 KiB): the whole file
    auto small = open_file(f.path);
    CHECK(small->size() == 50000);
    REQUIRE(small->prefix().size() == 50000);
    CHECK(std::memcmp(small->prefix().data(), f.bytes.data(), 50000) == 0);
    file_options o;
    o.prefetch = 4096;
    auto big = open_file(f.path, o);
    REQUIRE(big->prefix().size() == 4096);
    CHECK(std::memcmp(big->prefix().data(), f.bytes.data(), 4096) == 0);
    CHECK(big->name() == f.path);
    CHECK(big->hints().preferred_chunk == o.chunk_size);

    std::error_code ec;
    auto msg = what_of([&] { open_file(f.path + ".missing"); }, ec);
    CHECK(ec == std::error_code(ENOENT, std::system_category()));
    CHECK(msg.find(f.path + ".missing") != std::string::npos);

    o.queue_depth = 0;
    what_of([&] { open_file(f.path, o); }, ec);
    CHECK(ec == errc::InvalidArgument);
}

TEST_CASE("read_exact reads bytes and reports a short file as Truncated") {
    pattern_file f(50000);
    auto src = open_file(f.path);
    std::vector<std::byte> got(3000);
    src->read_exact(40000, got);
    CHECK(std::memcmp(got.data(), f.bytes.data() + 40000, 3000) == 0);
    std::vector<std::byte> past(20000);
    std::error_code ec;
    auto msg = what_of([&] { src->read_exact(40000, past); }, ec);
    CHECK(ec == errc::Truncated);
    CHECK(msg.find(f.path) != std::string::npos);
    CHECK(msg.find("50000") != std::string::npos);
}

TEST_CASE("random ranges land at unaligned destinations across qd, chunk and threads") {
    random_ranges_across_options(false);
}

TEST_CASE("O_DIRECT: random ranges, bounced edges and aligned middles", "[direct]") {
    random_ranges_across_options(true);
}

TEST_CASE("zero-length ops, ops past EOF and null destinations") {
    pattern_file f(10000);
    auto src = open_file(f.path);
    std::vector<std::byte> dst(100, canary);
    std::atomic<int> calls{0};
    io_control ctl;
    ctl.on_bytes = [&](std::size_t, std::uint64_t) { ++calls; };
    ctl.describe = [](std::uint32_t tag) { return "tensor 'w" + std::to_string(tag) + "'"; };
    std::vector<read_op> zero{{5, 0, nullptr, 1}, {10000, 0, nullptr, 2}};
    src->execute(zero, ctl);
    CHECK(calls == 0);

    std::vector<read_op> past{{0, 100, dst.data(), 1}, {9990, 20, dst.data(), 2}};
    std::error_code ec;
    auto msg = what_of([&] { src->execute(past, ctl); }, ec);
    CHECK(ec == errc::InvalidArgument);
    CHECK(msg.find("tensor 'w2'") != std::string::npos);
    CHECK(calls == 0);  // refused before any I/O: the valid op did not run either
    CHECK(dst[0] == canary);

    std::vector<read_op> null_dst{{0, 10, nullptr, 3}};
    what_of([&] { src->execute(null_dst, ctl); }, ec);
    CHECK(ec == errc::InvalidArgument);
}

TEST_CASE("a multi-GiB sparse file is read in parallel past 2^32") {
    temp_dir dir;
    const std::string path = (dir / "sparse.bin").string();
    const std::uint64_t size = (5ull << 30) + 12345;
    const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(size)) == 0);
    const std::uint64_t islands[] = {(1ull << 31) - 1000, (1ull << 32) + 7, size - 3000};
    for (std::uint64_t at : islands) {
        std::vector<std::byte> b(3000);
        test::fill_pattern(b, seed, at);
        REQUIRE(::pwrite(fd, b.data(), b.size(), static_cast<off_t>(at)) == 3000);
    }
    ::close(fd);
    auto expected = [&](std::uint64_t off) {
        for (std::uint64_t at : islands)
            if (off >= at && off < at + 3000) return test::pattern_byte(seed, off);
        return std::byte{0};
    };
    for (bool direct : {false, true}) {
        if (direct && direct_refused(path)) continue;
        auto src = open_file(path, opts(32, 4u << 20, 2, direct));
        const std::uint64_t len = 8u << 20;
        std::vector<std::uint64_t> starts;
        for (std::uint64_t i = 0; i < 16; ++i) starts.push_back(i * (size / 16) + 513);
        for (std::uint64_t at : islands) starts.push_back(std::min(at - 4000, size - len));
        host_buffer buf(starts.size() * len);
        std::vector<read_op> ops;
        for (std::size_t i = 0; i < starts.size(); ++i)
            ops.push_back({starts[i], len, buf.data() + i * len, static_cast<std::uint32_t>(i)});
        src->execute(ops, {});
        // Zeros everywhere except the islands, each checked byte by byte.
        std::vector<std::byte> want(len);
        for (std::size_t i = 0; i < ops.size(); ++i) {
            for (std::uint64_t k = 0; k < len; ++k)
                want[k] = starts[i] + k >= islands[0] ? expected(starts[i] + k) : std::byte{0};
            INFO("direct " << direct << " op " << i);
            REQUIRE(std::memcmp(buf.data() + i * len, want.data(), len) == 0);
        }
    }
}

namespace {

void injected_short_and_retried(bool direct) {
    pattern_file f((4u << 20) + 999);
    if (direct && direct_refused(f.path)) SKIP("the filesystem refuses O_DIRECT");
    std::atomic<unsigned> shortened{0}, retried{0}, seen{0};
    uring::scoped_completion_fault fault([&](const uring::completion_event& ev, int res) {
        const unsigned n = seen++;
        // Bytes a faulted read did not deliver are scribbled over, so only a re-read restores them.
        auto scribble = [&](int from) {
            if (res > from) std::memset(ev.buffer + from, 0x5A, static_cast<std::size_t>(res - from));
        };
        if (n < 60 && res > 0) {  // the first completions fail transiently
            ++retried;
            scribble(0);
            return n % 2 ? -EAGAIN : -EINTR;
        }
        // Later: every other read comes back short (aligned for O_DIRECT, as the kernel would).
        int s = res / 2;
        if (ev.direct) s = s / 4096 * 4096;
        if (n % 2 == 0 && s > 0) {
            ++shortened;
            scribble(s);
            return s;
        }
        return res;
    });
    for (auto mode : {file_options::buffered_mode::hot, file_options::buffered_mode::cold})
        for (unsigned threads : {1u, 2u}) {
            INFO("mode " << static_cast<int>(mode) << " threads " << threads);
            file_options o = opts(8, 65536, threads, direct);
            o.mode = mode;
            auto src = open_file(f.path, o);
            op_set set(f.bytes.size(), 30, 99 + threads, false);
            src->execute(set.ops, set.control());
            set.check(f.bytes);
        }
    CHECK(retried == 60);
    CHECK(shortened > 10);
}

void injected_eio_names_tensor_and_offset(bool direct) {
    pattern_file f(2u << 20);
    if (direct && direct_refused(f.path)) SKIP("the filesystem refuses O_DIRECT");
    std::atomic<std::uint64_t> failed_at{~0ull};
    std::atomic<bool> once{false};
    uring::scoped_completion_fault fault([&](const uring::completion_event& ev, int res) {
        if (ev.tag == 21 && !once.exchange(true)) {  // op 21: the 777 bytes that end at EOF
            failed_at = ev.file_offset;
            return -EIO;
        }
        return res;
    });
    auto src = open_file(f.path, opts(4, 65536, 2, direct));
    op_set set(f.bytes.size(), 20, 5, false);
    io_control ctl = set.control();
    std::error_code ec;
    auto msg = what_of([&] { src->execute(set.ops, ctl); }, ec);
    CHECK(ec == std::error_code(EIO, std::system_category()));
    CHECK(msg.find("tensor #21") != std::string::npos);
    CHECK(msg.find(f.path) != std::string::npos);
    CHECK(msg.find("file offset " + std::to_string(failed_at.load())) != std::string::npos);
    CHECK(set.landed[21].load() < set.ops[21].length);
    // Without describe(), the op is named by its tag.
    once = false;
    ctl.describe = nullptr;
    msg = what_of([&] { src->execute(set.ops, ctl); }, ec);
    CHECK(msg.find("op tag 21") != std::string::npos);
}

void truncated_after_open(bool direct, file_options::buffered_mode mode = file_options::buffered_mode::automatic) {
    pattern_file f(4u << 20);
    if (direct && direct_refused(f.path)) SKIP("the filesystem refuses O_DIRECT");
    file_options o = opts(8, 65536, 2, direct);
    o.mode = mode;
    auto src = open_file(f.path, o);
    REQUIRE(::truncate(f.path.c_str(), (1u << 20) + 100) == 0);
    host_buffer buf(4u << 20);
    std::vector<read_op> ops{{0, 4u << 20, buf.data(), 0}};
    std::error_code ec;
    auto msg = what_of([&] { src->execute(ops, {}); }, ec);
    CHECK(ec == errc::Truncated);
    CHECK(msg.find("shrank") != std::string::npos);
    CHECK(msg.find(f.path) != std::string::npos);
    // Only the last read crosses the new end, inside a block: it comes back
    // short, and the remainder (re-read aligned under O_DIRECT) finds EOF.
    std::vector<read_op> crossing{{(1u << 20) - 5000, 5300, buf.data(), 0}};
    msg = what_of([&] { src->execute(crossing, {}); }, ec);
    CHECK(ec == errc::Truncated);
    CHECK(msg.find("file offset " + std::to_string((1u << 20) + (direct ? 0 : 100))) != std::string::npos);
}

}  // namespace

TEST_CASE("injected -EAGAIN, -EINTR and short reads are recovered") { injected_short_and_retried(false); }
TEST_CASE("O_DIRECT: injected -EAGAIN, -EINTR and short reads are recovered", "[direct]") {
    injected_short_and_retried(true);
}
TEST_CASE("an injected -EIO names the path, the file offset and the tensor") {
    injected_eio_names_tensor_and_offset(false);
}
TEST_CASE("O_DIRECT: an injected -EIO names the path, the file offset and the tensor", "[direct]") {
    injected_eio_names_tensor_and_offset(true);
}
TEST_CASE("a file truncated after open gives Truncated, not a hang") {
    truncated_after_open(false);
    truncated_after_open(false, file_options::buffered_mode::cold);
}
TEST_CASE("O_DIRECT: a file truncated after open gives Truncated, not a hang", "[direct]") {
    truncated_after_open(true);
}

TEST_CASE("cancellation stops submissions and throws Cancelled") {
    pattern_file f(1u << 20);
    auto src = open_file(f.path, opts(1, 4096, 1, false));
    host_buffer buf(1u << 20);
    std::vector<read_op> ops{{0, 1u << 20, buf.data(), 0}};
    std::atomic<bool> cancel{true};
    std::atomic<std::uint64_t> got{0};
    io_control ctl;
    ctl.cancel = &cancel;
    ctl.on_bytes = [&](std::size_t, std::uint64_t n) {
        got += n;
        cancel = true;  // cancel as soon as the first chunk lands
    };
    std::error_code ec;
    what_of([&] { src->execute(ops, ctl); }, ec);
    CHECK(ec == errc::Cancelled);
    CHECK(got == 0);
    cancel = false;
    what_of([&] { src->execute(ops, ctl); }, ec);
    CHECK(ec == errc::Cancelled);
    CHECK(got == 4096);
    cancel = false;
    ctl.on_bytes = nullptr;
    src->execute(ops, ctl);  // the same source still works
    CHECK(std::memcmp(buf.data(), f.bytes.data(), 1u << 20) == 0);
}

TEST_CASE("open_source opens local paths; is_url recognises URL schemes") {
    CHECK(is_url("http://host/x"));
    CHECK(is_url("HTTPS://host/x"));
    CHECK(is_url("s3://bucket/key"));
    CHECK_FALSE(is_url("model.safetensors"));
    CHECK_FALSE(is_url("/data/http://x"));
    CHECK_FALSE(is_url("http:/x"));
    pattern_file f(5000);
    auto src = open_source(f.path);
    CHECK(src->size() == 5000);
}
