// Destroying the io_context while ringsafe::asio operations are pending
// (async_open, async_read, async_write / async_finish): everything they hold
// is freed (the ring, its eventfd, the files opened so far: the process's
// descriptor count is back where it was), no handler runs during or after
// the destruction, and the writer leaves no temporary behind. Each case
// stops the io_context after every number of handlers from 0 up, so that
// the destruction meets every step of the operation. The [pool] cases destroy
// it while work of theirs blocks on ringsafe's blocking pool (a custom open, a
// custom source, the writer's offloaded finish): once that work ends, it
// posts nothing, and the handler went unrun.
// Internal: the blocking pool's offload hook and drain (asio/blocking_pool.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "asio/blocking_pool.hpp"
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

// Where a blocking-pool task waits until the test lets it go on.
class gate {
public:
    // The task's side: marks it entered, then blocks until open().
    void pass() {
        std::unique_lock lock(m_);
        entered_ = true;
        cv_.notify_all();
        cv_.wait(lock, [&] { return open_; });
    }
    bool entered() {
        std::lock_guard lock(m_);
        return entered_;
    }
    // Waits (a minute at most: false then) until a task is at the gate.
    bool wait_entered() {
        std::unique_lock lock(m_);
        return cv_.wait_for(lock, std::chrono::minutes(1), [&] { return entered_; });
    }
    void open() {
        std::lock_guard lock(m_);
        open_ = true;
        cv_.notify_all();
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    bool entered_ = false;
    bool open_ = false;
};

// A file's source whose execute() first passes `g` (when given), and that
// counts its destruction in `gone`.
class watched_source final : public source {
public:
    watched_source(std::unique_ptr<source> inner, gate* g, std::atomic<int>& gone)
        : inner_(std::move(inner)), gate_(g), gone_(gone) {}
    ~watched_source() override { ++gone_; }
    const std::string& name() const noexcept override { return inner_->name(); }
    std::uint64_t size() const noexcept override { return inner_->size(); }
    std::span<const std::byte> prefix() const noexcept override { return inner_->prefix(); }
    void read_exact(std::uint64_t offset, std::span<std::byte> dst) override { inner_->read_exact(offset, dst); }
    void execute(std::span<const read_op> ops, const io_control& ctl) override {
        if (gate_) gate_->pass();
        inner_->execute(ops, ctl);
    }

private:
    std::unique_ptr<source> inner_;
    gate* gate_;
    std::atomic<int>& gone_;
};

// A completion handler's fate: `alive` expires when the handler is destroyed.
struct handler_probe {
    std::shared_ptr<int> token = std::make_shared<int>(0);
    std::weak_ptr<int> alive = token;
    std::atomic<int> calls{0};
};

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

TEST_CASE("asio teardown: with the io_context alive, a custom open and its pool reads complete on it",
          "[asio_teardown][pool]") {
    temp_dir dir;
    const std::string path = (dir / "c.safetensors").string();
    write_file(path, build_file(mixed).bytes);
    std::atomic<int> gone{0};
    reader_options ro;
    ro.open = [&](const std::string& spec) -> std::unique_ptr<source> {
        return std::make_unique<watched_source>(open_file(spec), nullptr, gone);
    };
    const auto me = std::this_thread::get_id();
    net::io_context io;
    std::optional<ra::async_reader> r;
    ra::async_open(io.get_executor(), path, ro, [&](ra::error_code ec, ra::async_reader opened) {
        CHECK_FALSE(ec);
        CHECK(std::this_thread::get_id() == me);
        r.emplace(std::move(opened));
    });
    io.run();
    REQUIRE(r);
    REQUIRE(r->valid());
    std::vector<std::vector<std::byte>> bufs;
    std::vector<std::span<std::byte>> dsts;
    for (auto& t : mixed) bufs.emplace_back(t.bytes);
    for (auto& b : bufs) dsts.emplace_back(b);
    std::uint64_t last = 0, total = 0;
    int calls = 0;
    ra::read_callbacks cb;
    cb.on_progress = [&](std::uint64_t done, std::uint64_t all) {
        CHECK(std::this_thread::get_id() == me);
        CHECK(done >= last);
        last = done;
        total = all;
    };
    ra::async_read(*r, r->get().all(), dsts, std::move(cb), [&](ra::error_code ec, std::size_t n) {
        ++calls;
        CHECK_FALSE(ec);
        CHECK(std::this_thread::get_id() == me);
        CHECK(n == total);
        CHECK(last == total);  // every byte's progress came before the handler
    });
    io.restart();
    io.run();
    CHECK(calls == 1);
    for (std::size_t i = 0; i < mixed.size(); ++i) CHECK(bufs[i] == tensor_bytes(mixed[i].name, mixed[i].bytes));
    r.reset();
    CHECK(gone == 1);
}

TEST_CASE("asio teardown: destroying the io_context while a custom open blocks on the pool runs no handler",
          "[asio_teardown][pool]") {
    temp_dir dir;
    const std::string path = (dir / "c.safetensors").string();
    write_file(path, build_file(mixed).bytes);
    const std::size_t fds = open_fds();
    gate g;
    std::atomic<int> gone{0};
    reader_options ro;
    ro.open = [&](const std::string& spec) -> std::unique_ptr<source> {
        g.pass();
        return std::make_unique<watched_source>(open_file(spec), nullptr, gone);
    };
    handler_probe probe;
    std::optional<net::io_context> io(std::in_place);
    ra::async_open(io->get_executor(), path, ro, [&calls = probe.calls, t = std::move(probe.token)](
                                                     ra::error_code, ra::async_reader) { ++calls; });
    REQUIRE(g.wait_entered());
    io.reset();  // the open still blocks on the pool
    g.open();
    ra::detail::drain_blocking_pool();
    CHECK(gone == 1);  // the reader opened for nobody is closed
    CHECK(probe.alive.expired());
    CHECK(probe.calls == 0);
    CHECK(open_fds() == fds);
}

TEST_CASE("asio teardown: destroying the io_context while a custom source reads on the pool runs no handler",
          "[asio_teardown][pool]") {
    temp_dir dir;
    const std::string path = (dir / "c.safetensors").string();
    write_file(path, build_file(mixed).bytes);
    {  // The process-wide ring pool keeps the ring of a first read: made before the count.
        auto warm = reader::open(path);
        std::vector<std::byte> b(warm.tensors()[0].size());
        std::vector<std::span<std::byte>> d{b};
        warm.read(warm.select({warm.tensors()[0].name}), d);
    }
    const std::size_t fds = open_fds();
    gate g;
    std::atomic<int> gone{0};
    reader_options ro;
    ro.open = [&](const std::string& spec) -> std::unique_ptr<source> {
        return std::make_unique<watched_source>(open_file(spec), &g, gone);
    };
    // The buffers outlive the io_context: the source writes into them once the gate opens.
    std::vector<std::vector<std::byte>> bufs;
    std::vector<std::span<std::byte>> dsts;
    for (auto& t : mixed) bufs.emplace_back(t.bytes);
    for (auto& b : bufs) dsts.emplace_back(b);
    handler_probe probe;
    std::atomic<int> progress_calls{0};
    std::optional<net::io_context> io(std::in_place);
    {
        ra::async_reader r(io->get_executor(), reader::open(path, ro));
        ra::read_callbacks cb;
        cb.on_progress = [&](std::uint64_t, std::uint64_t) { ++progress_calls; };  // the pool task reports bytes
        ra::async_read(r, r.get().all(), dsts, std::move(cb),
                       [&calls = probe.calls, t = std::move(probe.token)](ra::error_code, std::size_t) { ++calls; });
        io->poll();  // the read starts: its shard goes to the pool (a custom source)
        REQUIRE(g.wait_entered());
    }  // the async_reader goes first
    io.reset();
    g.open();
    ra::detail::drain_blocking_pool();
    CHECK(gone == 1);  // the last of the reader went with the pool task
    CHECK(probe.alive.expired());
    CHECK(probe.calls == 0);
    INFO(fd_list());
    CHECK(open_fds() == fds);
}

TEST_CASE("asio teardown: destroying the io_context while a writer's finish runs on the pool runs no handler",
          "[asio_teardown][pool]") {
    temp_dir dir;
    const auto out = (dir / "w.safetensors").string();
    const auto first = tensor_bytes("first", 4096);
    {
        writer w(out);
        w.add("first", dtype::U8, {first.size()}, first);
        w.finish();
    }
    const auto more = tensor_bytes("more", 4096);
    const std::size_t fds = open_fds();
    gate g;
    ra::detail::set_offload_hook([&] { g.pass(); });
    struct unhook {
        ~unhook() { ra::detail::set_offload_hook(nullptr); }
    } unhook_at_end;
    handler_probe probe;
    std::optional<net::io_context> io(std::in_place);
    {
        ra::async_writer w(io->get_executor(), writer::open_append(out));
        ra::async_write(w, "more", dtype::U8, {more.size()}, more, [](ra::error_code ec, std::size_t) {
            CHECK_FALSE(ec);
        });
        // Append mode: the finish runs on the pool.
        ra::async_finish(w, std::nullopt,
                         [&calls = probe.calls, t = std::move(probe.token)](ra::error_code, std::size_t) { ++calls; });
        for (int i = 0; i < 6000 && !g.entered(); ++i) io->run_one_for(std::chrono::milliseconds(10));
        REQUIRE(g.entered());
    }  // the async_writer goes first
    io.reset();
    g.open();
    ra::detail::drain_blocking_pool();
    CHECK(probe.alive.expired());
    CHECK(probe.calls == 0);
    CHECK(open_fds() == fds);  // the writer's engine went with the pool task
    CHECK(dir_entries(dir.path()) == std::vector<std::string>{"w.safetensors"});
}
