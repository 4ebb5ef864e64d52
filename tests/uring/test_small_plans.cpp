// Small plans (under uring::inline_plan_bytes in total) run inline: every
// read is submitted and completed on the calling thread, in every buffered
// mode, with threads > 1 and with O_DIRECT, and the bytes are exact. Plans
// just at the threshold take the usual path and are exact too.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "ringsafe/error.hpp"
#include "ringsafe/file_source.hpp"
#include "skip.hpp"
#include "test_support.hpp"
#include "uring/read_executor.hpp"

using namespace ringsafe;
using ringsafe::test::temp_dir;

namespace {

constexpr std::uint64_t file_bytes = 3u << 20;

struct small_file {
    temp_dir dir;
    std::string path = (dir / "small.bin").string();
    std::vector<std::byte> bytes = std::vector<std::byte>(file_bytes);
    small_file() {
        test::fill_pattern(bytes, 21);
        test::write_file(path, bytes);
    }
};

// `count` separate ranges totalling about `total` bytes, spread over the file,
// each into its own buffer; executes them and checks the bytes. Returns the
// threads on which their bytes were reported.
std::set<std::thread::id> run_plan(source& src, const std::vector<std::byte>& expect, unsigned count,
                                   std::uint64_t total, std::uint32_t seed) {
    std::mt19937_64 rng(seed);
    const std::uint64_t each = total / count;
    const std::uint64_t stride = file_bytes / count;
    std::vector<std::vector<std::byte>> bufs(count, std::vector<std::byte>(each, std::byte{0x5A}));
    std::vector<read_op> ops;
    for (unsigned i = 0; i < count; ++i) {
        const std::uint64_t off = i * stride + rng() % (stride - each);
        ops.push_back({off, each, bufs[i].data(), i});
    }
    std::mutex m;
    std::set<std::thread::id> seen;
    io_control ctl;
    ctl.on_bytes = [&](std::size_t, std::uint64_t) {
        std::lock_guard lock(m);
        seen.insert(std::this_thread::get_id());
    };
    src.execute(ops, ctl);
    for (unsigned i = 0; i < count; ++i)
        CHECK(std::memcmp(bufs[i].data(), expect.data() + ops[i].offset, each) == 0);
    return seen;
}

}  // namespace

TEST_CASE("small plans run on the calling thread in every mode and read exact bytes") {
    small_file f;
    using mode = file_options::buffered_mode;
    std::uint32_t seed = 0;
    for (mode m : {mode::automatic, mode::hot, mode::cold})
        for (bool punt : {true, false})
            for (unsigned threads : {1u, 2u, 4u}) {
                INFO("mode " << static_cast<int>(m) << " async_punt " << punt << " threads " << threads);
                file_options o;
                o.mode = m;
                o.async_punt = punt;
                o.threads = threads;
                o.chunk_size = 64u << 10;  // a 900 KiB plan is many chunks
                auto src = open_file(f.path, o);
                for (unsigned count : {1u, 2u, 8u, 30u}) {
                    INFO("ops " << count);
                    const auto seen = run_plan(*src, f.bytes, count, 900u << 10, ++seed);
                    CHECK(seen == std::set<std::thread::id>{std::this_thread::get_id()});
                }
                // At and above the threshold: the usual path, still exact.
                run_plan(*src, f.bytes, 8, uring::inline_plan_bytes, ++seed);
                run_plan(*src, f.bytes, 8, 2 * uring::inline_plan_bytes, ++seed);
            }
}

TEST_CASE("O_DIRECT: small plans run on the calling thread and read exact bytes", "[direct]") {
    small_file f;
    file_options o;
    o.direct = true;
    o.threads = 3;
    o.chunk_size = 64u << 10;
    std::unique_ptr<source> src;
    try {
        src = open_file(f.path, o);
    } catch (const error& e) {
        if (e.code() == std::error_code(EINVAL, std::system_category())) {
            SKIP("O_DIRECT not supported here");
        }
        throw;
    }
    for (unsigned count : {1u, 3u, 12u}) {
        const auto seen = run_plan(*src, f.bytes, count, 700u << 10, 100 + count);
        CHECK(seen == std::set<std::thread::id>{std::this_thread::get_id()});
    }
    run_plan(*src, f.bytes, 8, 3u << 20 >> 1, 200);
}
