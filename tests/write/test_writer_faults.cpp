// Fault tests for the writer: EFBIG from RLIMIT_FSIZE, EIO and short writes
// injected at the write ring's completion edge, SIGKILL mid-write, and crashes
// at every step of an append (ENOSPC on a small tmpfs: writer_enospc.cpp).
#include <catch2/catch.hpp>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "ringsafe/writer.hpp"
#include "write/stream_writer.hpp"
#include "uring/write_ring.hpp"
#include "written_file.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

std::string error_of(auto&& f) {
    try {
        f();
    } catch (const error& e) {
        return std::string(e.kind()) + "|" + std::to_string(e.code().value()) + "|" + e.what();
    }
    return "no error";
}

// Writes three 3 MiB tensors (a, b, c) through small blocks to `p`.
void write_three(const fs::path& p, bool direct) {
    writer_options o;
    o.direct = direct;
    o.block_size = 1 << 20;
    writer w(p.string(), o);
    for (const char* n : {"a", "b", "c"}) w.add(n, dtype::U8, {3u << 20}, pattern(3u << 20, n[0]));
    w.finish();
}

std::uint64_t fail_offset = 0;  // the write covering this file offset fails with EIO
int inject_eio(std::uint64_t off, std::uint32_t len, int res) {
    return off <= fail_offset && fail_offset < off + len ? -EIO : res;
}
int inject_short(std::uint64_t, std::uint32_t len, int res) {
    // Every full-length completion is cut to half (a multiple of 4096 for the 1 MiB blocks).
    return res == static_cast<int>(len) && len >= 8192 ? static_cast<int>(len / 2) : res;
}
int inject_zero(std::uint64_t, std::uint32_t, int) { return 0; }
// Every other submission completes with -ECANCELED without running, as io-wq
// reports work it cancelled because it could not start a worker while a
// signal was pending.
std::atomic<unsigned> submissions_seen{0}, cancels_injected{0};
bool inject_cancel(std::uint64_t, std::uint32_t) {
    if (submissions_seen.fetch_add(1) % 2) return false;
    cancels_injected.fetch_add(1);
    return true;
}

}  // namespace

TEST_CASE("EFBIG from RLIMIT_FSIZE names the tensor and leaves nothing behind") {
    temp_dir d;
    auto p = d / "big.safetensors";
    rlimit old{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
    rlimit small = old;
    small.rlim_cur = 5u << 20;  // the second tensor crosses it
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::string err;
    for (bool direct : {true, false}) {
        err = error_of([&] { write_three(p, direct); });
        CHECK_THAT(err, Catch::StartsWith("IoError|" + std::to_string(EFBIG)) && Catch::Contains("tensor 'b'") &&
                            Catch::Contains("file offset"));
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
    CHECK_FALSE(fs::exists(p));
    CHECK(dir_entries(d.path()).empty());
}

TEST_CASE("an I/O error injected at the completion edge abandons the file") {
    temp_dir d;
    auto p = d / "eio.safetensors";
    uring::write_completion_fault = inject_eio;
    // 4 MiB into the data section: inside tensor 'b' (bytes 3..6 MiB).
    fail_offset = 8 + reservation_for(1024, 64, 4096) + (4u << 20);
    auto err = error_of([&] { write_three(p, true); });
    uring::write_completion_fault = nullptr;
    CHECK_THAT(err, Catch::StartsWith("IoError|" + std::to_string(EIO)) && Catch::Contains("tensor 'b'"));
    CHECK_FALSE(fs::exists(p));
    CHECK(dir_entries(d.path()).empty());

    uring::write_completion_fault = inject_zero;
    err = error_of([&] { write_three(p, false); });
    uring::write_completion_fault = nullptr;
    CHECK_THAT(err, Catch::StartsWith("IoError") && Catch::Contains("tensor '") && Catch::Contains("no progress"));
    CHECK_FALSE(fs::exists(p));
}

TEST_CASE("short writes injected at the completion edge are resubmitted") {
    temp_dir d;
    for (bool direct : {true, false}) {
        auto p = d / "short.safetensors";
        uring::write_completion_fault = inject_short;
        write_three(p, direct);
        uring::write_completion_fault = nullptr;
        written_file f(p);
        CHECK(f.tensor("b") == pattern(3u << 20, 'b'));
        CHECK(f.tensor("c") == pattern(3u << 20, 'c'));
    }
}

TEST_CASE("-ECANCELED the writer did not ask for (io-wq under a pending signal) is resubmitted") {
    temp_dir d;
    for (bool direct : {true, false}) {
        auto p = d / "cancelled.safetensors";
        cancels_injected = 0;
        uring::write_cancel_fault = inject_cancel;
        const std::string err = error_of([&] { write_three(p, direct); });
        uring::write_cancel_fault = nullptr;
        CHECK(err == "no error");
        CHECK(cancels_injected.load() >= 3);
        written_file f(p);
        CHECK(f.tensor("a") == pattern(3u << 20, 'a'));
        CHECK(f.tensor("c") == pattern(3u << 20, 'c'));
    }
}

TEST_CASE("a writer killed mid-write leaves nothing at the target") {
    temp_dir d;
    auto p = d / "killed.safetensors";
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::close(ready[0]);
        writer w(p.string());
        auto chunk = pattern(1 << 20, 5);
        w.begin("huge", dtype::U8, {64u << 20});
        for (int i = 0; i < 8; ++i) w.append(chunk);
        ssize_t ignored = ::write(ready[1], "x", 1);  // mid-write: tell the parent
        (void)ignored;
        for (;;) ::pause();
    }
    ::close(ready[1]);
    char c;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    ::close(ready[0]);
    CHECK(WIFSIGNALED(st));
    CHECK_FALSE(fs::exists(p));
    CHECK(dir_entries(d.path()).empty());  // O_TMPFILE: not even a temporary
}

namespace {
write::append_step kill_at{};
void kill_at_step(write::append_step s) {
    if (s == kill_at) ::raise(SIGKILL);
}
}  // namespace

TEST_CASE("append: a crash at each step leaves the old file or the new one, repairably") {
    using write::append_step;
    temp_dir d;
    auto p = d / "journal.safetensors";
    auto old_a = pattern(5000, 1), new_b = pattern(7000, 2), new_c = pattern(300, 3);
    for (auto step : {append_step::data_written, append_step::data_synced, append_step::header_written,
                      append_step::header_synced}) {
        {
            writer w(p.string());
            w.add("a", dtype::U8, {5000}, old_a);
            w.finish();
        }
        auto original = read_file(p);
        pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            kill_at = step;
            write::append_step_hook = kill_at_step;
            auto w = writer::open_append(p.string());
            w.add("b", dtype::U8, {7000}, new_b);
            w.add("c", dtype::U8, {300}, new_c);
            w.finish();
            ::_exit(0);
        }
        int st = 0;
        ::waitpid(pid, &st, 0);
        REQUIRE(WIFSIGNALED(st));
        auto now = read_file(p);
        INFO("killed at step " << static_cast<int>(step));
        if (step == append_step::data_written || step == append_step::data_synced) {
            // Old header, old data intact, a tail readers refuse.
            CHECK(std::equal(original.begin(), original.end(), now.begin()));
            CHECK(now.size() == original.size() + 7300);
            CHECK_THROWS_AS(parse_file(now), error);
            CHECK_THROWS_AS(writer::open_append(p.string()), error);
            append_options ro;
            ro.repair = true;
            auto w = writer::open_append(p.string(), ro);
            w.finish();
            CHECK(read_file(p) == original);
        } else {
            written_file f(p);  // the new header is complete: a valid new file
            CHECK(f.tensor("a") == old_a);
            CHECK(f.tensor("b") == new_b);
            CHECK(f.tensor("c") == new_c);
        }
        fs::remove(p);
    }
}

TEST_CASE("append: a torn header rewrite is refused by readers and repaired to a valid prefix") {
    temp_dir d;
    auto p = d / "torn.safetensors";
    {
        writer w(p.string());
        w.add("a", dtype::U8, {100}, pattern(100, 1));
        w.finish();
    }
    auto original = read_file(p);
    std::string b_name(600, 'b'), c_name(600, 'c');  // long names: the change spans several 512-byte sectors
    {
        auto w = writer::open_append(p.string());
        w.add(b_name, dtype::U8, {10}, pattern(10, 2));
        w.add(c_name, dtype::U8, {20}, pattern(20, 3));
        w.finish();
    }
    auto full = read_file(p);
    const std::size_t header_end = 8 + written_file(p).hdr.header_size;
    std::size_t first = 0;
    while (original[first] == full[first]) ++first;
    // Tear: sectors at or after the first change keep their old bytes from the
    // third sector of the change on.
    for (std::size_t keep_sectors : {0u, 1u, 2u}) {
        auto torn = full;
        std::size_t cut = (first / 512 + keep_sectors) * 512;
        if (keep_sectors == 0) cut = first;  // nothing of the new header landed but the data did
        for (std::size_t i = std::max(cut, first); i < header_end; ++i)
            torn[i] = original[i];
        auto q = d / ("torn" + std::to_string(keep_sectors) + ".safetensors");
        write_file(q, torn);
        INFO("sectors kept " << keep_sectors);
        CHECK_THROWS_AS(parse_file(torn), error);
        append_options ro;
        ro.repair = true;
        auto w = writer::open_append(q.string(), ro);
        w.finish();
        written_file f(q);
        CHECK(f.tensor("a") == pattern(100, 1));
        // Whatever survived is whole: b and c appear only with their exact bytes.
        if (f.hdr.find(b_name)) CHECK(f.tensor(b_name) == pattern(10, 2));
        if (f.hdr.find(c_name)) CHECK(f.tensor(c_name) == pattern(20, 3));
        CHECK(f.bytes.size() == f.hdr.file_size());
    }
}
