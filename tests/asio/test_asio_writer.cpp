// ringsafe::asio::async_writer on the caller's io_context: files byte-identical
// to the blocking writer's, completions on the io_context's thread, a timer
// that keeps ticking during a large write, ordering, errors (the same kinds
// and messages as the blocking writer, nothing left at the target),
// abandonment, status overloads, relocation and append mode. The [threads]
// case runs in a process of its own (tests/asio/meson.build): it needs a process in
// which nothing has started ringsafe's blocking pool.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "checkpoint_bytes.hpp"
#include "ringsafe/asio.hpp"
#include "test_support.hpp"
#include "uring/write_ring.hpp"
#include "written_file.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace net = boost::asio;
namespace ra = ringsafe::asio;
namespace fs = std::filesystem;

namespace {

struct named_tensor {
    std::string name;
    dtype type;
    std::vector<std::uint64_t> shape;
    std::vector<std::byte> bytes;
};

// Sizes around the block size (64 KiB below): empty, unaligned, several blocks.
std::vector<named_tensor> sample_tensors() {
    std::vector<named_tensor> ts;
    const std::uint64_t sizes[] = {0, 3, 4096, 70001, 65536 * 5 + 17, 1 << 20};
    for (std::size_t i = 0; i < std::size(sizes); ++i) {
        std::string name = "t" + std::to_string(i);
        ts.push_back({name, dtype::U8, {sizes[i]}, ringsafe::test::tensor_bytes(name, sizes[i])});
    }
    ts.push_back({"f", dtype::F32, {3, 5}, ringsafe::test::tensor_bytes("f", 60)});
    return ts;
}

writer_options small_blocks(bool direct) {
    writer_options wo;
    wo.direct = direct;
    wo.block_size = 64 << 10;  // staging fills and waits for completions many times
    wo.staging_blocks = 2;
    wo.queue_depth = 2;
    return wo;
}

const metadata_map sample_meta{{"format", "pt"}, {"by", "test_asio_writer"}};

void write_blocking(const std::string& path, const std::vector<named_tensor>& ts, const writer_options& wo) {
    writer w(path, wo);
    for (auto& t : ts) w.add(t.name, t.type, t.shape, t.bytes);
    w.finish(sample_meta);
}

// Writes `ts` with async_write + async_finish on a single-threaded io_context;
// every handler checks that it runs on that thread.
void write_async(const std::string& path, const std::vector<named_tensor>& ts, const writer_options& wo,
                 bool& all_on_io_thread) {
    net::io_context io;
    const auto io_thread = std::this_thread::get_id();
    all_on_io_thread = true;
    ra::async_writer w(io.get_executor(), writer(path, wo));
    std::size_t done = 0;
    for (auto& t : ts)
        ra::async_write(w, t.name, t.type, t.shape, t.bytes, [&](ra::error_code ec, std::size_t n) {
            CHECK_FALSE(ec);
            CHECK(n == t.bytes.size());
            all_on_io_thread = all_on_io_thread && std::this_thread::get_id() == io_thread;
            ++done;
        });
    ra::async_finish(w, sample_meta, [&](ra::error_code ec, std::size_t) {
        CHECK_FALSE(ec);
        all_on_io_thread = all_on_io_thread && std::this_thread::get_id() == io_thread;
        ++done;
    });
    io.run();
    CHECK(done == ts.size() + 1);
}

std::uint64_t fail_offset = 0;
int inject_eio(std::uint64_t off, std::uint32_t len, int res) {
    return off <= fail_offset && fail_offset < off + len ? -EIO : res;
}

// Every other submission, one-shot operations (fsync, renameat...) included,
// completes with -ECANCELED without running, as io-wq reports work it could
// not start a worker for under a pending signal.
unsigned submissions_seen = 0, one_shot_cancels = 0;
bool inject_cancel(std::uint64_t off, std::uint32_t) {
    if (submissions_seen++ % 2) return false;
    if (off == uring::one_shot_offset) ++one_shot_cancels;
    return true;
}

std::string message_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const std::system_error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("asio writer: no thread is created, and every completion runs on the io_context's thread",
          "[asio_writer][threads]") {
    temp_dir dir;
    const std::size_t before = user_threads();
    bool on_io_thread = false;
    auto ts = sample_tensors();
    write_async((dir / "a.safetensors").string(), ts, small_blocks(true), on_io_thread);
    CHECK(on_io_thread);
    CHECK(user_threads() == before);
    CHECK(reader::open((dir / "a.safetensors").string()).tensors().size() == ts.size());
}

TEST_CASE("asio writer: -ECANCELED it did not ask for, in data writes and in the finish's operations, is "
          "resubmitted", "[asio_writer]") {
    temp_dir dir;
    auto ts = sample_tensors();
    for (bool direct : {true, false}) {
        const auto want = (dir / "blocking.safetensors").string();
        const auto got = (dir / "async.safetensors").string();
        write_blocking(want, ts, small_blocks(direct));
        one_shot_cancels = 0;
        uring::write_cancel_fault = inject_cancel;
        bool on_io_thread = false;
        write_async(got, ts, small_blocks(direct), on_io_thread);
        uring::write_cancel_fault = nullptr;
        CHECK(one_shot_cancels >= 2);
        CHECK(ringsafe::test::read_file(got) == ringsafe::test::read_file(want));
        fs::remove(want);
        fs::remove(got);
    }
}

TEST_CASE("asio writer: files are byte-identical to the blocking writer's", "[asio_writer]") {
    temp_dir dir;
    auto ts = sample_tensors();
    for (bool direct : {true, false}) {
        const auto want = (dir / "blocking.safetensors").string();
        const auto got = (dir / "async.safetensors").string();
        write_blocking(want, ts, small_blocks(direct));
        write_file(got, std::string("an older file, replaced atomically"));  // publishing renames over it
        bool on_io_thread = false;
        write_async(got, ts, small_blocks(direct), on_io_thread);
        CHECK(on_io_thread);
        CHECK(read_file(got) == read_file(want));
        // Default options (16 MiB blocks) too.
        write_blocking(want, ts, writer_options{});
        fs::remove(got);
        write_async(got, ts, writer_options{}, on_io_thread);
        CHECK(read_file(got) == read_file(want));
        CHECK(dir_entries(dir.path()).size() == 2);  // no temporaries left behind
    }
}

TEST_CASE("asio writer: a rewrite keeps the replaced file's permissions, as the blocking writer's", "[asio_writer]") {
    temp_dir dir;
    const auto path = (dir / "model.safetensors").string();
    for (mode_t m : {0600, 0640}) {
        write_file(path, std::string("an older file"));
        REQUIRE(::chmod(path.c_str(), m) == 0);
        bool on_io_thread = false;
        write_async(path, sample_tensors(), small_blocks(true), on_io_thread);
        struct stat st {};
        REQUIRE(::stat(path.c_str(), &st) == 0);
        CHECK((st.st_mode & 07777) == m);
    }
}

TEST_CASE("asio writer: a timer on the same thread keeps ticking during a large synced write", "[asio_writer]") {
    temp_dir dir;
    net::io_context io;
    std::vector<std::byte> big(256u << 20);
    fill_pattern(big, 7);
    int ticks_during = 0;
    bool writing = true;
    net::steady_timer timer(io);
    std::function<void()> tick = [&] {
        timer.expires_after(std::chrono::microseconds(200));
        timer.async_wait([&](const boost::system::error_code& ec) {
            if (ec || !writing) return;
            ++ticks_during;
            tick();
        });
    };
    tick();
    writer_options wo;
    wo.sync = true;
    ra::async_writer w(io.get_executor(), writer((dir / "big.safetensors").string(), wo));
    ra::async_write(w, "big", dtype::U8, {big.size()}, big, [](ra::error_code ec, std::size_t) { CHECK_FALSE(ec); });
    ra::async_finish(w, std::nullopt, [&](ra::error_code ec, std::size_t n) {
        CHECK_FALSE(ec);
        CHECK(n == big.size());
        writing = false;
        timer.cancel();
    });
    io.run();
    CHECK(ticks_during > 0);
    CHECK(fs::file_size(dir / "big.safetensors") == w.get().stats().file_size);
}

TEST_CASE("asio writer: overlapping async_writes run in initiation order", "[asio_writer]") {
    temp_dir dir;
    const auto out = (dir / "o.safetensors").string();
    net::io_context io;
    auto ts = sample_tensors();
    std::vector<std::string> completed;
    ra::async_writer w(io.get_executor(), writer(out, small_blocks(true)));
    for (auto it = ts.rbegin(); it != ts.rend(); ++it)  // reverse name order: the file must follow initiation
        ra::async_write(w, it->name, it->type, it->shape, it->bytes,
                        [&, name = it->name](ra::error_code ec, std::size_t) {
                            CHECK_FALSE(ec);
                            completed.push_back(name);
                        });
    ra::async_finish(w, std::nullopt, [&](ra::error_code ec, std::size_t) {
        CHECK_FALSE(ec);
        completed.push_back("finish");
    });
    io.run();
    std::vector<std::string> want;
    for (auto it = ts.rbegin(); it != ts.rend(); ++it) want.push_back(it->name);
    want.push_back("finish");
    CHECK(completed == want);
    auto r = reader::open(out);
    std::uint64_t last_begin = 0;
    for (auto it = ts.rbegin(); it != ts.rend(); ++it) {
        auto& t = r.at(it->name);
        CHECK(t.begin >= last_begin);
        last_begin = t.begin;
        std::vector<std::byte> got(t.size());
        std::vector<std::span<std::byte>> dst{got};
        r.read(r.select({t.name}), dst);
        CHECK(got == it->bytes);
    }
}

TEST_CASE("asio writer: an I/O error names tensor and offset as the blocking writer does, and leaves nothing",
          "[asio_writer]") {
    temp_dir dir;
    const auto out = (dir / "eio.safetensors").string();
    std::vector<named_tensor> ts;
    for (const char* name : {"a", "b", "c"})
        ts.push_back({name, dtype::U8, {3u << 20}, ringsafe::test::tensor_bytes(name, 3u << 20)});
    writer_options wo;
    wo.block_size = 1 << 20;
    fail_offset = 8 + reservation_for(1024, 64, 4096) + (4u << 20);  // inside 'b' (bytes 3..6 MiB)
    uring::write_completion_fault = inject_eio;
    const std::string blocking = message_of([&] { write_blocking(out, ts, wo); });
    REQUIRE_FALSE(fs::exists(out));

    net::io_context io;
    std::vector<status> sts(ts.size() + 1);
    ra::error_code failed;
    std::string message;
    bool empty_at_handler = false;
    auto on_done = [&](std::size_t i) {
        return [&, i](ra::error_code ec, std::size_t) {
            if (!ec || failed) return;
            failed = ec;
            message = sts[i].message;
            empty_at_handler = dir_entries(dir.path()).empty();
        };
    };
    {
        ra::async_writer w(io.get_executor(), writer(out, wo));
        for (std::size_t i = 0; i < ts.size(); ++i)
            ra::async_write(w, ts[i].name, ts[i].type, ts[i].shape, ts[i].bytes, sts[i], on_done(i));
        ra::async_finish(w, std::nullopt, sts.back(), on_done(ts.size()));
        io.run();
    }
    uring::write_completion_fault = nullptr;
    CHECK(static_cast<std::error_code>(failed) == std::error_code(EIO, std::system_category()));
    CHECK(empty_at_handler);
    CHECK_FALSE(fs::exists(out));
    CHECK(dir_entries(dir.path()).empty());
    INFO(blocking);
    CHECK_THAT(blocking, Catch::Contains("tensor 'b'") && Catch::Contains("file offset"));
    // The message is the blocking writer's, whichever operation reported it.
    REQUIRE_FALSE(message.empty());
    CHECK_THAT(blocking, Catch::StartsWith(message));
}

TEST_CASE("asio writer: an async_writer destroyed with writes in flight leaves nothing at the target",
          "[asio_writer]") {
    temp_dir dir;
    const auto out = (dir / "gone.safetensors").string();
    net::io_context io;
    auto big = ringsafe::test::tensor_bytes("big", 40u << 20);
    bool wrote = false;
    net::posix::stream_descriptor reactor_up(io);  // the io_context's epoll, interrupter and timerfd are not the writer's
    const auto fds_before = open_fds();
    {
        ra::async_writer w(io.get_executor(), writer(out, writer_options{}));
        ra::async_write(w, "big", dtype::U8, {big.size()}, big, [&](ra::error_code ec, std::size_t) {
            CHECK_FALSE(ec);
            wrote = true;
        });
        io.run_one();  // starts the write: blocks in flight
    }
    io.run();
    CHECK(wrote);
    CHECK_FALSE(fs::exists(out));
    CHECK(dir_entries(dir.path()).empty());
    CHECK(open_fds() == fds_before);  // the temporary, the ring and the eventfd are gone
}

TEST_CASE("asio writer: the status overloads fill the message; validation leaves the writer usable", "[asio_writer]") {
    temp_dir dir;
    const auto out = (dir / "s.safetensors").string();
    net::io_context io;
    status size_st, dup_st, ok_st, finish_st, again_st;
    ok_st.message = "stale";
    auto a = ringsafe::test::tensor_bytes("a", 100);
    ra::async_writer w(io.get_executor(), writer(out, small_blocks(false)));
    ra::async_write(w, "a", dtype::F32, {7}, a, size_st, [](ra::error_code ec, std::size_t) { CHECK(ec); });
    ra::async_write(w, "a", dtype::U8, {100}, a, ok_st, [](ra::error_code ec, std::size_t) { CHECK_FALSE(ec); });
    ra::async_write(w, "a", dtype::U8, {100}, a, dup_st, [](ra::error_code ec, std::size_t) { CHECK(ec); });
    ra::async_finish(w, std::nullopt, finish_st, [](ra::error_code ec, std::size_t n) {
        CHECK_FALSE(ec);
        CHECK(n == 100);
    });
    ra::async_finish(w, std::nullopt, again_st, [](ra::error_code ec, std::size_t) {
        CHECK(ec == make_error_code(errc::WriterState));
    });
    io.run();
    CHECK(size_st.code == make_error_code(errc::TensorInvalidInfo));
    CHECK_THAT(size_st.message, Catch::Contains("tensor 'a'") && Catch::Contains("100 bytes given"));
    CHECK(dup_st.code);
    CHECK_THAT(dup_st.message, Catch::Contains("'a'"));
    CHECK_FALSE(ok_st.code);
    CHECK(ok_st.message.empty());
    CHECK_FALSE(finish_st.code);
    CHECK_THAT(again_st.message, Catch::Contains(out));
    CHECK(reader::open(out).tensors().size() == 1);
}

TEST_CASE("asio writer: reservation overflow relocates, and append mode appends", "[asio_writer]") {
    temp_dir dir;
    const auto out = (dir / "r.safetensors").string();
    std::vector<named_tensor> ts;
    for (int i = 0; i < 40; ++i) {
        std::string name = "a_rather_long_tensor_name_that_fills_the_header_" + std::to_string(i);
        ts.push_back({name, dtype::U8, {5000}, ringsafe::test::tensor_bytes(name, 5000)});
    }
    writer_options wo;
    wo.reserve_bytes = 1;  // one page: 40 long entries do not fit
    const auto want = (dir / "r_blocking.safetensors").string();
    write_blocking(want, ts, wo);
    bool on_io_thread = false;
    write_async(out, ts, wo, on_io_thread);
    CHECK(read_file(out) == read_file(want));

    // Append two tensors to it through an async_writer.
    net::io_context io;
    std::vector<named_tensor> more;
    for (const char* name : {"x", "y"}) more.push_back({name, dtype::U8, {3000}, ringsafe::test::tensor_bytes(name, 3000)});
    {
        writer_options wide;
        wide.reserve_bytes = 64 << 10;
        write_blocking(out, ts, wide);
        ra::async_writer w(io.get_executor(), writer::open_append(out));
        for (auto& t : more)
            ra::async_write(w, t.name, t.type, t.shape, t.bytes, [](ra::error_code ec, std::size_t) { CHECK_FALSE(ec); });
        ra::async_finish(w, std::nullopt, [](ra::error_code ec, std::size_t n) {
            CHECK_FALSE(ec);
            CHECK(n == 6000);
        });
        io.run();
    }
    auto r = reader::open(out);
    CHECK(r.tensors().size() == ts.size() + 2);
    auto& y = r.at("y");
    std::vector<std::byte> got(y.size());
    std::vector<std::span<std::byte>> dst{got};
    r.read(r.select({"y"}), dst);
    CHECK(got == more[1].bytes);
}
