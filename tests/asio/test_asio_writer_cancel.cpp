// Cancellation of ringsafe::asio::async_write / async_finish through the
// handler's cancellation slot: the operation completes with
// operation_aborted after the file has been abandoned (nothing at the target,
// no temporary; append mode: the file back to its old bytes), operations
// queued behind it fail with WriterState, the caller's bytes are not read
// after the handler (ASan builds catch a late read of the freed buffer), and
// a cancellation after completion does nothing. Terminal, partial and total
// cancellation are all exercised.
#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "checkpoint_bytes.hpp"
#include "ringsafe/asio.hpp"
#include "test_support.hpp"
#include "written_file.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace net = boost::asio;
namespace ra = ringsafe::asio;
namespace fs = std::filesystem;

namespace {

// Two 64 KiB staging blocks: a 1 MiB tensor must wait for completions many times.
writer_options small_staging() {
    writer_options wo;
    wo.block_size = 64 << 10;
    wo.staging_blocks = 2;
    wo.queue_depth = 2;
    return wo;
}

}  // namespace

TEST_CASE("asio writer cancel: a write waiting for staging is aborted, the file abandoned, later operations fail",
          "[asio_writer_cancel]") {
    temp_dir dir;
    const auto out = (dir / "w.safetensors").string();
    net::io_context io;
    ra::async_writer w(io.get_executor(), writer(out, small_staging()));
    // The source lives on the heap and is freed (after being overwritten) in
    // the handler: a read of it after the handler would be a use after free.
    auto src = std::make_unique<std::vector<std::byte>>(ringsafe::test::tensor_bytes("big", 1 << 20));
    net::cancellation_signal sig;
    status st;
    bool aborted = false, empty_at_handler = false, later_failed = false, finish_failed = false;
    ra::async_write(w, "big", dtype::U8, {src->size()}, *src, st,
                    net::bind_cancellation_slot(sig.slot(), [&](ra::error_code ec, std::size_t n) {
                        aborted = ec == net::error::operation_aborted && n == 0;
                        empty_at_handler = !fs::exists(out) && dir_entries(dir.path()).empty();
                        std::fill(src->begin(), src->end(), std::byte{0x5a});
                        src.reset();
                    }));
    sig.emit(net::cancellation_type::terminal);  // right after initiation: the write starts, then stops
    auto small = ringsafe::test::tensor_bytes("small", 100);
    ra::async_write(w, "small", dtype::U8, {100}, small, [&](ra::error_code ec, std::size_t) {
        later_failed = ec == make_error_code(errc::WriterState);
    });
    ra::async_finish(w, std::nullopt, [&](ra::error_code ec, std::size_t) {
        finish_failed = ec == make_error_code(errc::WriterState);
    });
    io.run();
    CHECK(aborted);
    CHECK(empty_at_handler);
    CHECK(later_failed);
    CHECK(finish_failed);
    CHECK(st.code == static_cast<std::error_code>(ra::error_code(net::error::operation_aborted)));
    CHECK_THAT(st.message, Catch::Contains(out) && Catch::Contains("'big'"));
    CHECK(dir_entries(dir.path()).empty());
}

TEST_CASE("asio writer cancel: a write queued behind another is aborted once the earlier one completed",
          "[asio_writer_cancel]") {
    temp_dir dir;
    const auto out = (dir / "q.safetensors").string();
    net::io_context io;
    ra::async_writer w(io.get_executor(), writer(out, small_staging()));
    auto a = ringsafe::test::tensor_bytes("a", 4 << 20);
    auto b = ringsafe::test::tensor_bytes("b", 4 << 20);
    net::cancellation_signal sig;
    int first_ok = 0;
    bool second_aborted = false, empty_at_handler = false;
    ra::async_write(w, "a", dtype::U8, {a.size()}, a, [&](ra::error_code ec, std::size_t n) {
        first_ok = !ec && n == a.size() ? 1 : -1;
    });
    ra::async_write(w, "b", dtype::U8, {b.size()}, b,
                    net::bind_cancellation_slot(sig.slot(), [&](ra::error_code ec, std::size_t) {
                        second_aborted = ec == net::error::operation_aborted && first_ok == 1;
                        empty_at_handler = dir_entries(dir.path()).empty();
                    }));
    // Fires on the io_context's first wait, while "a" still waits for staging
    // (4 MiB through 128 KiB of it).
    net::steady_timer t(io, net::steady_timer::duration::zero());
    t.async_wait([&](const ra::error_code&) { sig.emit(net::cancellation_type::partial); });
    io.run();
    CHECK(first_ok == 1);
    CHECK(second_aborted);
    CHECK(empty_at_handler);
    CHECK_FALSE(fs::exists(out));
}

TEST_CASE("asio writer cancel: a finish cancelled before its rename leaves nothing at the target",
          "[asio_writer_cancel]") {
    temp_dir dir;
    const auto out = (dir / "f.safetensors").string();
    net::io_context io;
    writer_options wo = small_staging();
    wo.sync = true;
    ra::async_writer w(io.get_executor(), writer(out, wo));
    auto a = ringsafe::test::tensor_bytes("a", 300000);
    net::cancellation_signal sig;
    status st;
    bool wrote = false, aborted = false, empty_at_handler = false;
    ra::async_write(w, "a", dtype::U8, {a.size()}, a, [&](ra::error_code ec, std::size_t) {
        wrote = !ec;
        sig.emit(net::cancellation_type::total);  // the finish is queued: it flushes, then stops
    });
    ra::async_finish(w, std::nullopt, st, net::bind_cancellation_slot(sig.slot(), [&](ra::error_code ec, std::size_t) {
                         aborted = ec == net::error::operation_aborted;
                         empty_at_handler = dir_entries(dir.path()).empty();
                     }));
    io.run();
    CHECK(wrote);
    CHECK(aborted);
    CHECK(empty_at_handler);
    CHECK_FALSE(fs::exists(out));
    CHECK_THAT(st.message, Catch::Contains(out) && Catch::Contains("cancelled"));
}

TEST_CASE("asio writer cancel: a cancelled append leaves the file as it was", "[asio_writer_cancel]") {
    temp_dir dir;
    const auto out = (dir / "a.safetensors").string();
    {
        writer_options wide;
        wide.reserve_bytes = 64 << 10;
        writer base(out, wide);
        auto x = ringsafe::test::tensor_bytes("x", 5000);
        base.add("x", dtype::U8, {x.size()}, x);
        base.finish();
    }
    const auto before = read_file(out);
    net::io_context io;
    append_options ao;
    ao.block_size = 64 << 10;  // the 2 MiB tensor waits for staging
    ao.staging_blocks = 2;
    ao.queue_depth = 2;
    ra::async_writer w(io.get_executor(), writer::open_append(out, ao));
    auto y = ringsafe::test::tensor_bytes("y", 2 << 20);
    net::cancellation_signal sig;
    bool aborted = false, restored_at_handler = false;
    ra::async_write(w, "y", dtype::U8, {y.size()}, y,
                    net::bind_cancellation_slot(sig.slot(), [&](ra::error_code ec, std::size_t) {
                        aborted = ec == net::error::operation_aborted;
                        restored_at_handler = read_file(out) == before;
                    }));
    sig.emit(net::cancellation_type::terminal);
    io.run();
    CHECK(aborted);
    CHECK(restored_at_handler);
    CHECK(reader::open(out).tensors().size() == 1);
}

TEST_CASE("asio writer cancel: a cancellation after completion does nothing", "[asio_writer_cancel]") {
    temp_dir dir;
    const auto out = (dir / "done.safetensors").string();
    net::io_context io;
    ra::async_writer w(io.get_executor(), writer(out, small_staging()));
    auto a = ringsafe::test::tensor_bytes("a", 200000);
    net::cancellation_signal write_sig, finish_sig;
    bool wrote = false, finished = false;
    ra::async_write(w, "a", dtype::U8, {a.size()}, a,
                    net::bind_cancellation_slot(write_sig.slot(), [&](ra::error_code ec, std::size_t) {
                        wrote = !ec;
                        write_sig.emit(net::cancellation_type::terminal);  // the write is done: no effect
                    }));
    ra::async_finish(w, std::nullopt, net::bind_cancellation_slot(finish_sig.slot(), [&](ra::error_code ec, std::size_t) {
                         finished = !ec;
                         finish_sig.emit(net::cancellation_type::terminal);
                     }));
    io.run();
    CHECK(wrote);
    CHECK(finished);
    auto r = reader::open(out);
    REQUIRE(r.tensors().size() == 1);
    std::vector<std::byte> got(a.size());
    std::vector<std::span<std::byte>> dst{got};
    r.read(r.select({"a"}), dst);
    CHECK(got == a);
    CHECK(dir_entries(dir.path()).size() == 1);
}
