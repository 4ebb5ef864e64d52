// include/ringsafe/asio.hpp: every completion token style, errors with their
// messages, short reads, cancellation (the buffer is never written after the
// handler), many concurrent reads, sharded checkpoints, O_DIRECT sources
// (more in test_asio_direct.cpp), several io_context threads, and the async
// writer.
#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <thread>
#include <tuple>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include "async_read_checks.hpp"
#include "checkpoint_bytes.hpp"
#include "ringsafe/asio.hpp"
#include "skip.hpp"
#include "uring/fault_injection.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace net = boost::asio;
namespace ra = ringsafe::asio;

namespace {

std::string write_checkpoint(const temp_dir& dir, const std::string& name, const std::vector<tensor_spec>& ts) {
    auto f = build_file(ts);
    write_file(dir / name, f.bytes);
    return (dir / name).string();
}

std::uint64_t total_of(const reader& r, const selection& sel) {
    std::uint64_t n = 0;
    for (auto i : sel.indices()) n += r.tensors()[i].size();
    return n;
}

const ra::error_code aborted = net::error::operation_aborted;

// async_read of every tensor of r, run to completion on io: no error, every byte right.
void read_all_exactly(net::io_context& io, ra::async_reader& r) {
    auto sel = r.get().all();
    tensor_buffers b(r.get(), sel);
    ra::error_code got = make_error_code(errc::IoError);
    ra::async_read(r, sel, b.spans, [&](ra::error_code ec, std::size_t) { got = ec; });
    io.run();
    CHECK_FALSE(got);
    b.check(r.get(), sel);
}

}  // namespace

TEST_CASE("asio: callback tokens open and read on the caller's io_context", "[asio][tokens]") {
    temp_dir dir;
    auto path = write_checkpoint(dir, "m.safetensors", mixed);
    net::io_context io;
    ra::async_reader r;
    std::error_code open_ec = make_error_code(errc::IoError);
    // A handler may take std::error_code: the boost error_code converts.
    ra::async_open(io.get_executor(), path, {}, [&](std::error_code ec, ra::async_reader opened) {
        open_ec = ec;
        r = std::move(opened);
    });
    io.run();
    REQUIRE_FALSE(open_ec);
    REQUIRE(r.valid());
    auto sel = r.get().all();
    tensor_buffers b(r.get(), sel);
    ra::error_code read_ec = make_error_code(errc::IoError);
    std::size_t n = 0;
    std::thread::id ran_on;
    ra::async_read(r, sel, b.spans, [&](ra::error_code ec, std::size_t bytes) {
        read_ec = ec;
        n = bytes;
        ran_on = std::this_thread::get_id();
    });
    CHECK(n == 0);  // never completes inside the initiating call
    io.restart();
    io.run();
    REQUIRE_FALSE(read_ec);
    CHECK(n == total_of(r.get(), sel));
    CHECK(ran_on == std::this_thread::get_id());
    b.check(r.get(), sel);
}

TEST_CASE("asio: use_awaitable and as_tuple in a coroutine", "[asio][tokens]") {
    temp_dir dir;
    auto path = write_checkpoint(dir, "m.safetensors", mixed);
    net::io_context io;
    bool finished = false;
    net::co_spawn(io, [&]() -> net::awaitable<void> {
        auto ex = co_await net::this_coro::executor;
        auto r = co_await ra::async_open(ex, path, net::use_awaitable);
        auto sel = r.get().select_glob("[bd]");
        std::vector<std::byte> arena(r.get().packed_size(sel));
        auto plan = r.get().plan_packed(sel, arena);
        std::size_t n = co_await ra::async_read(r, plan, net::use_awaitable);
        CHECK(n == plan.total_bytes());
        for (auto& p : plan.placements()) {
            const auto& t = r.get().tensors()[p.tensor];
            CHECK(std::vector<std::byte>(arena.begin() + p.offset, arena.begin() + p.offset + p.size) ==
                  tensor_bytes(t.name, t.size()));
        }
        // as_tuple: errors as values; a plan from another reader is refused.
        auto other = reader::open(path);
        std::vector<std::byte> other_arena(other.packed_size(other.all()));
        auto foreign = other.plan_packed(other.all(), other_arena);
        auto [ec, m] = co_await ra::async_read(r, foreign, net::as_tuple(net::use_awaitable));
        CHECK(ec == make_error_code(errc::InvalidArgument));
        CHECK(m == 0);
        // A missing file: the error and an empty async_reader.
        const std::string missing = (dir / "missing.safetensors").string();
        auto bad_open = co_await ra::async_open(ex, missing,
                                                net::as_tuple(net::use_awaitable));
        CHECK(std::get<0>(bad_open) == std::error_code(ENOENT, std::system_category()));
        CHECK_FALSE(std::get<1>(bad_open).valid());
        finished = true;
    }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
    io.run();
    CHECK(finished);
}

TEST_CASE("asio: use_future with the io_context on another thread", "[asio][tokens]") {
    temp_dir dir;
    auto path = write_checkpoint(dir, "m.safetensors", mixed);
    net::io_context io;
    auto guard = net::make_work_guard(io);
    std::thread runner([&] { io.run(); });
    auto r = ra::async_open(io.get_executor(), path, net::use_future).get();
    auto sel = r.get().select({"e", "a"});
    tensor_buffers b(r.get(), sel);
    auto n = ra::async_read(r, sel, b.spans, net::use_future).get();
    CHECK(n == total_of(r.get(), sel));
    b.check(r.get(), sel);
    // A too-small buffer: the future throws the error naming the tensor's kind.
    std::vector<std::byte> small(10);
    std::vector<std::span<std::byte>> one{std::span<std::byte>(small)};
    auto fut = ra::async_read(r, r.get().select({"b"}), one, net::use_future);
    try {
        fut.get();
        FAIL("no error");
    } catch (const boost::system::system_error& e) {
        CHECK(e.code() == make_error_code(errc::BufferTooSmall));
    }
    guard.reset();
    r = ra::async_reader();
    runner.join();
}

TEST_CASE("asio: deferred operations start only when invoked", "[asio][tokens]") {
    temp_dir dir;
    auto path = write_checkpoint(dir, "m.safetensors", mixed);
    net::io_context io;
    ra::async_reader r(io.get_executor(), reader::open(path));
    auto sel = r.get().select({"d"});
    tensor_buffers b(r.get(), sel);
    auto plan = r.get().plan(sel, b.spans);
    auto op = ra::async_read(r, plan, net::deferred);
    io.run();
    CHECK(b.bufs[0] == std::vector<std::byte>(b.bufs[0].size(), std::byte{0}));  // nothing read yet
    std::size_t n = 0;
    std::move(op)([&](ra::error_code ec, std::size_t m) {
        CHECK_FALSE(ec);
        n = m;
    });
    io.restart();
    io.run();
    CHECK(n == 560'000);
    b.check(r.get(), sel);
}

TEST_CASE("asio: errors carry the kind, and status the message naming file, offset and tensor", "[asio][errors]") {
    temp_dir dir;
    auto path = write_checkpoint(dir, "m.safetensors", mixed);
    net::io_context io;
    ra::async_reader r(io.get_executor(), reader::open(path));
    auto sel = r.get().select({"d"});
    tensor_buffers b(r.get(), sel);
    SECTION("an I/O error from the ring") {
        uring::scoped_completion_fault fault([](const uring::completion_event&, int) { return -EIO; });
        status st;
        ra::error_code got;
        ra::async_read(r, r.get().plan(sel, b.spans), st, [&](ra::error_code ec, std::size_t) { got = ec; });
        io.run();
        CHECK(got == std::error_code(EIO, std::system_category()));
        CHECK(st.code == static_cast<std::error_code>(got));
        CHECK(st.message.find(path) != std::string::npos);
        CHECK(st.message.find("tensor 'd'") != std::string::npos);
        CHECK(st.message.find("file offset") != std::string::npos);
    }
    SECTION("the file shrank after open") {
        std::filesystem::resize_file(path, 200);
        status st;
        ra::error_code got;
        ra::async_read(r, r.get().plan(sel, b.spans), st, [&](ra::error_code ec, std::size_t) { got = ec; });
        io.run();
        CHECK(got == make_error_code(errc::Truncated));
        CHECK(st.message.find("tensor 'd'") != std::string::npos);
    }
}

TEST_CASE("asio: short reads are resubmitted for the remainder", "[asio][faults]") {
    temp_dir dir;
    auto path = write_checkpoint(dir, "m.safetensors", mixed);
    net::io_context io;
    ra::async_reader r(io.get_executor(), reader::open(path));
    std::atomic<unsigned> shortened{0}, retried{0};
    // Every first read of an op returns half its bytes (and garbage past them),
    // or -EAGAIN once; the executor must read the rest again.
    uring::scoped_completion_fault fault([&](const uring::completion_event& ev, int res) {
        if (res > 1 && ev.requested == static_cast<std::uint64_t>(res) && (ev.file_offset % 3) == 0) {
            const int half = res / 2;
            std::memset(ev.buffer + half, 0xEE, static_cast<std::size_t>(res - half));
            ++shortened;
            return half;
        }
        if (res > 0 && (ev.file_offset % 3) == 1 && retried.fetch_add(1) < 3) return -EAGAIN;
        return res;
    });
    read_all_exactly(io, r);
    CHECK(shortened > 0);
}

TEST_CASE("asio: -ECANCELED nobody asked for (io-wq under a pending signal) is retried", "[asio][faults]") {
    temp_dir dir;
    auto path = write_checkpoint(dir, "m.safetensors", mixed);
    net::io_context io;
    ra::async_reader r(io.get_executor(), reader::open(path));
    std::atomic<unsigned> completions{0}, injected{0};
    uring::scoped_completion_fault fault([&](const uring::completion_event&, int res) {
        if (completions.fetch_add(1) % 2) return res;
        ++injected;
        return -ECANCELED;
    });
    read_all_exactly(io, r);
    CHECK(injected > 0);
}

TEST_CASE("asio: cancellation mid-read completes with operation_aborted and no later writes", "[asio][cancel]") {
    temp_dir dir;
    // 8 MiB in 64 KiB reads, 4 in flight: cancelled after the first completion.
    auto path = write_checkpoint(dir, "big.safetensors", {{"w", "U8", {8u << 20}, 8u << 20}});
    net::io_context io;
    reader_options ro;
    ro.plan.chunk_size = 64u << 10;
    ra::async_options ao;
    ao.queue_depth = 4;
    ra::async_reader r(io.get_executor(), reader::open(path, ro), ao);
    std::vector<std::byte> buf(8u << 20, std::byte{0xAB});  // guard pattern
    auto sel = r.get().all();
    auto plan = r.get().plan(sel, std::vector<std::span<std::byte>>{buf});
    REQUIRE(plan.op_count() >= 100);

    net::cancellation_signal signal;
    std::atomic<bool> handler_ran{false}, late_completion{false};
    std::atomic<unsigned> completions{0};
    auto type = GENERATE(net::cancellation_type::terminal, net::cancellation_type::partial,
                         net::cancellation_type::total);
    uring::scoped_completion_fault fault([&](const uring::completion_event&, int res) {
        if (handler_ran) late_completion = true;
        if (completions++ == 0) signal.emit(type);
        return res;
    });
    ra::error_code got;
    std::size_t landed = 0;
    std::vector<std::byte> at_completion;
    ra::async_read(r, plan, net::bind_cancellation_slot(signal.slot(), [&](ra::error_code ec, std::size_t n) {
                       got = ec;
                       landed = n;
                       at_completion = buf;
                       handler_ran = true;
                   }));
    io.run();
    REQUIRE(handler_ran);
    CHECK(got == aborted);
    CHECK(landed < buf.size());
    // Give any straggling read time to land, then make sure none did.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    io.restart();
    io.poll();
    CHECK_FALSE(late_completion);
    CHECK(buf == at_completion);
    // Untouched guard bytes remain: the read really stopped midway.
    CHECK(std::count(buf.begin(), buf.end(), std::byte{0xAB}) > 0);
}

TEST_CASE("asio: destroying the async_reader cancels its outstanding reads", "[asio][cancel]") {
    temp_dir dir;
    auto path = write_checkpoint(dir, "big.safetensors", {{"w", "U8", {4u << 20}, 4u << 20}});
    net::io_context io;
    reader_options ro;
    ro.plan.chunk_size = 64u << 10;
    std::vector<std::byte> buf(4u << 20);
    ra::error_code got;
    bool ran = false;
    {
        ra::async_reader r(io.get_executor(), reader::open(path, ro), ra::async_options{2});
        auto sel = r.get().all();
        ra::async_read(r, sel, {std::span<std::byte>(buf)}, [&](ra::error_code ec, std::size_t) {
            got = ec;
            ran = true;
        });
        io.run_one();  // the read has started
    }
    io.run();
    REQUIRE(ran);
    CHECK((got == aborted || !got));  // it may have finished before the cancel arrived
}

TEST_CASE("asio: many concurrent reads from one reader, io_context on two threads", "[asio][concurrent]") {
    temp_dir dir;
    std::vector<tensor_spec> ts;
    for (int i = 0; i < 40; ++i) ts.push_back({"t" + std::to_string(i), "U8", {std::uint64_t(5000 + 977 * i)}, std::uint64_t(5000 + 977 * i)});
    auto path = write_checkpoint(dir, "many.safetensors", ts);
    net::io_context io;
    reader_options ro;
    ro.plan.chunk_size = 8192;
    ra::async_reader r(io.get_executor(), reader::open(path, ro), ra::async_options{8});
    read_every_tensor_on_two_threads(io, r);
}

TEST_CASE("asio: a sharded checkpoint reads its shards concurrently", "[asio][sharded]") {
    temp_dir dir;
    write_checkpoint(dir, "s1.safetensors", {{"x", "F32", {1000}, 4000}, {"y", "U8", {300000}, 300000}});
    write_checkpoint(dir, "s2.safetensors", {{"z", "I64", {5000}, 40000}});
    write_file(dir / "m.safetensors.index.json",
               std::string(R"({"weight_map":{"x":"s1.safetensors","y":"s1.safetensors","z":"s2.safetensors"}})"));
    net::io_context io;
    ra::error_code got = make_error_code(errc::IoError);
    net::co_spawn(io, [&]() -> net::awaitable<void> {
        const std::string index = (dir / "m.safetensors.index.json").string();
        auto ex = co_await net::this_coro::executor;
        auto r = co_await ra::async_open(ex, index, net::use_awaitable);
        CHECK(r.get().sharded());
        auto sel = r.get().all();
        tensor_buffers b(r.get(), sel);
        auto [ec, n] = co_await ra::async_read(r, sel, b.spans, net::as_tuple(net::use_awaitable));
        got = ec;
        CHECK(n == 344000);
        b.check(r.get(), sel);
    }, net::detached);
    io.run();
    CHECK_FALSE(got);
}

TEST_CASE("asio: O_DIRECT sources read the same bytes", "[asio][direct]") {
    temp_dir dir;
    auto path = write_checkpoint(dir, "m.safetensors", mixed);
    reader_options ro;
    ro.source.file.direct = true;
    std::optional<reader> rd;
    try {
        rd.emplace(reader::open(path, ro));
    } catch (const error& e) {
        if (e.code() == make_error_code(errc::InvalidArgument)) {
            SKIP("no O_DIRECT here: " << e.what());
        }
        throw;
    }
    net::io_context io;
    ra::async_reader r(io.get_executor(), std::move(*rd));
    read_all_exactly(io, r);
}

TEST_CASE("asio: read_callbacks report bytes and finished tensors on the io_context's thread", "[asio][progress]") {
    temp_dir dir;
    std::vector<tensor_spec> ts = mixed;
    ts.push_back({"z", "U8", {0}, 0});
    auto path = write_checkpoint(dir, "m.safetensors", ts);
    const bool direct = GENERATE(false, true);  // the ring, buffered or O_DIRECT
    reader_options ro;
    ro.plan.chunk_size = 64u << 10;
    ro.source.file.direct = direct;
    std::optional<reader> rd;
    try {
        rd.emplace(reader::open(path, ro));
    } catch (const error& e) {
        if (!direct || e.code() != make_error_code(errc::InvalidArgument)) throw;
        SKIP("no O_DIRECT here: " << e.what());
    }
    net::io_context io;
    ra::async_reader r(io.get_executor(), std::move(*rd));
    auto sel = r.get().select({"b", "z", "a", "d"});
    tensor_buffers b(r.get(), sel);
    progress_recorder rec(r.get(), sel, b);
    ra::error_code got = make_error_code(errc::IoError);
    std::size_t n = 0;
    bool progress_before_handler = false;
    ra::async_read(r, sel, b.spans, rec.callbacks(), [&](ra::error_code ec, std::size_t m) {
        got = ec;
        n = m;
        progress_before_handler = rec.last == m;
    });
    io.run();
    REQUIRE_FALSE(got);
    CHECK(n == total_of(r.get(), sel));
    CHECK(progress_before_handler);
    CHECK(rec.calls >= 10);  // 64 KiB chunks: many reports, not one at the end
    CHECK_FALSE(rec.elsewhere);
    rec.check_complete(n);
    b.check(r.get(), sel);
}

TEST_CASE("asio: async_write and async_finish publish a file the reader reads back", "[asio][writer]") {
    temp_dir dir;
    const auto out = (dir / "out.safetensors").string();
    net::io_context io;
    std::vector<std::vector<std::byte>> data;
    for (int i = 0; i < 3; ++i) data.push_back(tensor_bytes("w" + std::to_string(i), 4096 * (i + 1)));
    std::size_t data_bytes = 0;
    status dup_st;
    const metadata_map meta{{"k", "v"}};
    net::co_spawn(io, [&]() -> net::awaitable<void> {
        writer_options wo;
        wo.direct = false;
        ra::async_writer w(co_await net::this_coro::executor, writer(out, wo));
        for (int i = 0; i < 3; ++i) {
            const std::string name = std::string(1, 'w') + std::to_string(i);
            std::vector<std::uint64_t> shape(1, data[i].size());  // no braced lists in co_await (GCC 12)
            auto n = co_await ra::async_write(w, name, dtype::U8, shape, data[i],
                                              net::use_awaitable);
            CHECK(n == data[i].size());
        }
        // A duplicate name is refused, and the writer stays usable.
        const std::string dup = "w0";
        std::vector<std::uint64_t> shape(1, data[0].size());
        auto [ec, n] = co_await ra::async_write(w, dup, dtype::U8, shape, data[0], dup_st,
                                                net::as_tuple(net::use_awaitable));
        CHECK(ec);
        CHECK(n == 0);
        CHECK_FALSE(std::filesystem::exists(out));  // nothing published before finish
        data_bytes = co_await ra::async_finish(w, meta, net::use_awaitable);
    }, [](std::exception_ptr e) { if (e) std::rethrow_exception(e); });
    io.run();
    CHECK(dup_st.message.find("w0") != std::string::npos);
    REQUIRE(std::filesystem::exists(out));
    CHECK(data_bytes == 4096 * (1 + 2 + 3));
    auto r = reader::open(out);
    REQUIRE(r.tensors().size() == 3);
    for (int i = 0; i < 3; ++i) {
        auto& t = r.at("w" + std::to_string(i));
        std::vector<std::byte> got(t.size());
        std::vector<std::span<std::byte>> dst{std::span<std::byte>(got)};
        r.read(r.select({t.name}), dst);
        CHECK(got == data[i]);
    }
    CHECK(r.metadata()->at("k") == "v");
}

TEST_CASE("asio: an async_writer destroyed without finish leaves nothing at the target", "[asio][writer]") {
    temp_dir dir;
    const auto out = (dir / "out.safetensors").string();
    net::io_context io;
    auto bytes = tensor_bytes("a", 1000);
    {
        writer_options wo;
        wo.direct = false;
        ra::async_writer w(io.get_executor(), writer(out, wo));
        ra::async_write(w, "a", dtype::U8, {1000}, bytes, [](ra::error_code ec, std::size_t) { CHECK_FALSE(ec); });
    }
    io.run();
    CHECK_FALSE(std::filesystem::exists(out));
    CHECK(std::filesystem::is_empty(dir.path()));
}
