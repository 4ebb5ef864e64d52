// Destroying the io_context while ringsafe::asio operations are pending
// (async_open, async_read, async_write / async_finish): everything they hold
// is freed (the ring, its eventfd, the files opened so far: the process's
// descriptor count is back where it was), no handler runs during or after
// the destruction, and the writer leaves no temporary behind. Each case
// stops the io_context after every number of handlers from 0 up, so that
// the destruction meets every step of the operation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "checkpoint_bytes.hpp"
#include "open_verdict.hpp"
#include "ringsafe/asio.hpp"
#include "test_support.hpp"
#include "written_file.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace net = boost::asio;
namespace ra = ringsafe::asio;
namespace fs = std::filesystem;

namespace {
std::string fd_list() {
    std::string out;
    for (auto& e : fs::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        out += e.path().filename().string() + "->" + fs::read_symlink(e.path(), ec).string() + " ";
    }
    return out;
}

// Runs up to `steps` handlers, or fewer when `done` turns true first.
void run_steps(net::io_context& io, std::size_t steps, const bool& done) {
    for (std::size_t i = 0; i < steps && !done; ++i)
        if (io.run_one() == 0) break;
}

}  // namespace

TEST_CASE("asio teardown: destroying the io_context mid async_open frees the ring and runs no handler",
          "[asio_teardown]") {
    temp_dir dir;
    const std::string index = write_one_tensor_shards(dir.path(), 12);
    reader_options ro;
    ro.parallel_shards = 3;
    ro.source.file.prefetch = 16;  // every header takes a second read
    const std::size_t fds = open_fds();
    std::size_t mid_open = 0, opened = 0;
    for (std::size_t steps = 0; steps < 80; ++steps) {
        INFO("destroyed after " << steps << " handlers");
        int calls = 0;
        bool done = false;
        std::optional<net::io_context> io(std::in_place);
        {
            ra::async_reader kept;
            ra::async_open(io->get_executor(), index, ro, [&](ra::error_code ec, ra::async_reader r) {
                ++calls;
                done = true;
                CHECK_FALSE(ec);
                kept = std::move(r);
            });
            run_steps(*io, steps, done);
        }  // an opened reader, bound to io, goes first
        mid_open += !done;
        opened += done;
        const int before = calls;
        io.reset();
        CHECK(calls == before);
        INFO(fd_list());
        CHECK(open_fds() == fds);
    }
    CHECK(mid_open >= 10);  // the destruction met the open in many of its steps
    CHECK(opened >= 1);
}

TEST_CASE("asio teardown: destroying the io_context mid async_read frees the ring and runs no handler",
          "[asio_teardown]") {
    temp_dir dir;
    const std::string path = (dir / "c.safetensors").string();
    write_file(path, build_file(mixed).bytes);
    ra::async_options ao;
    ao.queue_depth = 1;  // one read at a time: many steps
    const std::size_t fds = open_fds();
    std::size_t mid_read = 0;
    for (std::size_t steps = 0; steps < 24; ++steps) {
        INFO("destroyed after " << steps << " handlers");
        // The buffers outlive the io_context: the kernel may write into them until it is gone.
        std::vector<std::vector<std::byte>> bufs;
        std::vector<std::span<std::byte>> dsts;
        for (auto& t : mixed) bufs.emplace_back(t.bytes);
        for (auto& b : bufs) dsts.emplace_back(b);
        int calls = 0;
        bool done = false;
        std::optional<net::io_context> io(std::in_place);
        {
            ra::async_reader r(io->get_executor(), reader::open(path), ao);
            ra::async_read(r, r.get().all(), dsts, [&](ra::error_code ec, std::size_t) {
                ++calls;
                done = true;
                CHECK_FALSE(ec);
            });
            run_steps(*io, steps, done);
        }  // the async_reader goes first (it must not outlive its io_context)
        mid_read += !done;
        const int before = calls;
        io.reset();
        CHECK(calls == before);
        CHECK(open_fds() == fds);
    }
    CHECK(mid_read >= 3);
}

TEST_CASE("asio teardown: destroying the io_context mid async_write / async_finish leaves no temporary and runs "
          "no handler", "[asio_teardown]") {
    temp_dir dir;
    const auto out = (dir / "w.safetensors").string();
    writer_options wo;
    wo.block_size = 64 << 10;  // a 1 MiB tensor waits for staging many times
    wo.staging_blocks = 2;
    wo.queue_depth = 2;
    const auto big = tensor_bytes("big", 1 << 20);
    const std::size_t fds = open_fds();
    std::size_t mid_write = 0, finished = 0;
    for (std::size_t steps = 0; steps < 40; steps += 1 + steps / 8) {
        INFO("destroyed after " << steps << " handlers");
        int calls = 0;
        bool done = false;
        std::optional<net::io_context> io(std::in_place);
        {
            ra::async_writer w(io->get_executor(), writer(out, wo));
            ra::async_write(w, "big", dtype::U8, {big.size()}, big, [&](ra::error_code ec, std::size_t) {
                ++calls;
                CHECK_FALSE(ec);
            });
            ra::async_finish(w, std::nullopt, [&](ra::error_code ec, std::size_t) {
                ++calls;
                done = true;
                CHECK_FALSE(ec);
            });
            run_steps(*io, steps, done);
        }  // the async_writer goes first
        mid_write += !done;
        finished += done;
        const int before = calls;
        io.reset();
        CHECK(calls == before);
        INFO(fd_list());
        CHECK(open_fds() == fds);
        // Published (when the finish got that far) or nothing; never a temporary.
        const auto entries = dir_entries(dir.path());
        CHECK((entries.empty() || entries == std::vector<std::string>{"w.safetensors"}));
        if (done) CHECK(written_file(out).tensor("big") == big);
        fs::remove(out);
    }
    CHECK(mid_write >= 3);
    CHECK(finished >= 1);
}
