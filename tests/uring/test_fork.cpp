// Fork safety: a reader opened and used before fork() keeps working in both
// the parent and the child, concurrently or one after the other. The child
// must not touch the parent's io_uring rings (shared SQ/CQ memory, private
// liburing indices); a hang becomes a failure through a bounded waitpid() in
// the parent, which first prints the hung child's stacks (alarm() in the child
// is a backstop).
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ringsafe/reader.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using ringsafe::test::temp_dir;
using ringsafe::test::wait_child;

namespace {

constexpr std::uint64_t seed = 11;
constexpr std::uint64_t tensor_bytes = 6u << 20;  // 6 MiB: several chunks per whole read

// A one-tensor checkpoint ("t", U8, [tensor_bytes]) of pattern bytes.
struct fork_file {
    temp_dir dir;
    std::string path;
    std::vector<std::byte> data;
    fork_file() : path((dir / "fork.safetensors").string()), data(tensor_bytes) {
        test::fill_pattern(data, seed);
        std::string header = "{\"t\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(tensor_bytes) +
                             "],\"data_offsets\":[0," + std::to_string(tensor_bytes) + "]}}";
        while (header.size() % 8) header += ' ';
        std::vector<std::byte> file(8 + header.size() + data.size());
        const std::uint64_t n = header.size();
        for (int i = 0; i < 8; ++i) file[i] = std::byte(n >> (8 * i));
        std::memcpy(file.data() + 8, header.data(), header.size());
        std::memcpy(file.data() + 8 + header.size(), data.data(), data.size());
        test::write_file(path, file);
    }
};

// `rounds` reads (alternating random row ranges and the whole tensor), each
// checked byte for byte; false at the first mismatch or error.
bool read_rounds(reader& r, const std::vector<std::byte>& expect, unsigned rounds, std::uint32_t rng_seed) {
    std::mt19937_64 rng(rng_seed);
    std::vector<std::byte> buf(tensor_bytes);
    try {
        for (unsigned i = 0; i < rounds; ++i) {
            std::uint64_t begin = 0, end = tensor_bytes;
            if (i % 4 != 3) {
                begin = rng() % tensor_bytes;
                end = begin + 1 + rng() % std::min<std::uint64_t>(tensor_bytes - begin, i % 2 ? 4096 : 3u << 20);
            }
            std::memset(buf.data(), 0x5A, end - begin);
            r.read_rows("t", begin, end, std::span(buf.data(), end - begin));
            if (std::memcmp(buf.data(), expect.data() + begin, end - begin) != 0) return false;
        }
    } catch (const std::exception&) {
        return false;
    }
    return true;
}

// Forks; the child runs `child` (under a 240 s alarm) and exits 0 when it
// returns true. Returns the child's wait status, or -1 when it hung.
template <class F>
int run_child_then(F&& child, const std::function<void()>& meanwhile) {
    const pid_t pid = ::fork();
    if (pid < 0) FAIL("fork failed: " << std::strerror(errno));
    if (pid == 0) {
        ::alarm(240);  // a backstop: the parent reports a hang at 120 s
        ::_exit(child() ? 0 : 1);
    }
    meanwhile();
    return wait_child(pid, 120);
}

reader_options mode_options(int mode) {
    reader_options o;
    using m = file_options::buffered_mode;
    switch (mode) {
    case 0: break;  // defaults: automatic, async_punt
    case 1: o.source.file.mode = m::hot; o.source.file.threads = 2; break;
    case 2: o.source.file.mode = m::hot; o.source.file.async_punt = false; o.source.file.threads = 2; break;
    case 3: o.source.file.mode = m::cold; o.source.file.threads = 2; break;
    }
    o.plan.chunk_size = 1u << 20;
    o.source.file.chunk_size = 1u << 20;
    return o;
}

}  // namespace

TEST_CASE("fork: parent and child read the same reader at the same time", "[fork]") {
    fork_file f;
    for (int mode = 0; mode < 4; ++mode) {
        INFO("mode " << mode);
        reader r = reader::open(f.path, mode_options(mode));
        REQUIRE(read_rounds(r, f.data, 4, 1));  // the parent's rings exist before fork
        bool parent_ok = false;
        const int status = run_child_then([&] { return read_rounds(r, f.data, 200, 2); },
                                          [&] { parent_ok = read_rounds(r, f.data, 200, 3); });
        CHECK(parent_ok);
        REQUIRE(status != -1);  // -1: the child hung and was killed
        CHECK(WIFEXITED(status));
        if (WIFSIGNALED(status)) FAIL("child killed by signal " << WTERMSIG(status));
        CHECK(WEXITSTATUS(status) == 0);
        CHECK(read_rounds(r, f.data, 20, 4));  // the parent's rings still work
    }
}

TEST_CASE("fork: the child reads alone, then the parent reads", "[fork]") {
    fork_file f;
    for (int mode = 0; mode < 4; ++mode) {
        INFO("mode " << mode);
        reader r = reader::open(f.path, mode_options(mode));
        REQUIRE(read_rounds(r, f.data, 4, 5));
        const int status = run_child_then(
            [&] {
                // A grandchild too: the child's fresh rings are inherited in turn.
                if (!read_rounds(r, f.data, 50, 6)) return false;
                const pid_t g = ::fork();
                if (g == 0) ::_exit(read_rounds(r, f.data, 20, 7) ? 0 : 1);
                const bool mine = read_rounds(r, f.data, 20, 8);
                int gs = wait_child(g, 60);
                return mine && gs != -1 && WIFEXITED(gs) && WEXITSTATUS(gs) == 0;
            },
            [] {});
        REQUIRE(status != -1);
        if (WIFSIGNALED(status)) FAIL("child killed by signal " << WTERMSIG(status));
        CHECK(WEXITSTATUS(status) == 0);
        CHECK(read_rounds(r, f.data, 50, 9));
    }
}

TEST_CASE("fork: a child that never reads destroys the reader without touching the rings", "[fork]") {
    fork_file f;
    std::optional<reader> r(reader::open(f.path, mode_options(1)));
    REQUIRE(read_rounds(*r, f.data, 4, 10));
    const int status = run_child_then(
        [&] {
            r.reset();
            return true;
        },
        [] {});
    REQUIRE(status != -1);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    CHECK(read_rounds(*r, f.data, 20, 11));
}
