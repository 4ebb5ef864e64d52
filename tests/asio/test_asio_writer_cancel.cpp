// Cancellation of ringsafe::asio::async_write / async_finish through the
// handler's cancellation slot: the operation completes with
// operation_aborted after the file has been abandoned (nothing at the target,
// no temporary; append mode: the file back to its old bytes), operations
// queued behind it fail with WriterState, the caller's bytes are not read
// after the handler (ASan builds catch a late read of the freed buffer), and
// a cancellation after completion does nothing. Terminal, partial and total
// cancellation are all exercised. A finish cancelled (or its writer closed)
// at each of its ring operations, the rename / link included, either
// publishes the whole file or leaves nothing, and says which.
// Internal: the write ring's submission hook (uring/write_ring.hpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
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
#include "uring/write_ring.hpp"
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

// The write ring's submission hook, as an observer: counts one-shot
// submissions (a finish's header write, fsyncs, rename / link, directory
// open) and runs at_submission at the fire_at-th (from 0), before that
// operation goes to the kernel; the operation itself runs.
int one_shots_seen = 0;
int fire_at = -1;
std::function<void()> at_submission;

std::vector<std::byte> to_bytes(const std::string& s) {
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    return {p, p + s.size()};
}
bool observe_submission(std::uint64_t offset, std::uint32_t) {
    if (offset == uring::one_shot_offset && one_shots_seen++ == fire_at && at_submission) at_submission();
    return false;
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

TEST_CASE("asio writer cancel: a finish cancelled or closed at any of its ring operations, the rename included, "
          "publishes the whole file or leaves nothing, and says which", "[asio_writer_cancel]") {
    const bool sync = GENERATE(true, false);            // sync: fsync, rename / link, directory open + fsync
    const bool close_writer = GENERATE(false, true);    // the async_writer destroyed instead of a cancellation
    const bool replace = GENERATE(false, true);         // an older file at the target (link fails: named temporary + rename)
    INFO("sync " << sync << ", close the writer " << close_writer << ", replace " << replace);
    temp_dir dir;
    const auto out = (dir / "f.safetensors").string();
    writer_options wo = small_staging();
    wo.sync = sync;
    wo.sync_dir = sync;
    const auto a = ringsafe::test::tensor_bytes("a", 300000);
    std::vector<std::string> outcomes;
    for (int k = 0;; ++k) {
        INFO("fired at one-shot submission " << k);
        REQUIRE(k < 20);
        const std::string older = "an older file, replaced atomically or kept";
        if (replace) write_file(out, older);
        net::io_context io;
        std::optional<ra::async_writer> w(std::in_place, io.get_executor(), writer(out, wo));
        net::cancellation_signal sig;
        bool fired = false;
        at_submission = [&] {
            fired = true;
            if (close_writer)
                w.reset();
            else
                sig.emit(net::cancellation_type::terminal);
        };
        one_shots_seen = 0;
        fire_at = k;
        uring::write_cancel_fault = observe_submission;
        status st;
        ra::error_code got;
        int calls = 0;
        std::vector<std::string> entries_at_handler;
        bool whole_at_handler = false, older_at_handler = false;
        ra::async_write(*w, "a", dtype::U8, {a.size()}, a, [&](ra::error_code ec, std::size_t) { CHECK_FALSE(ec); });
        ra::async_finish(*w, std::nullopt, st,
                         net::bind_cancellation_slot(sig.slot(), [&](ra::error_code ec, std::size_t n) {
                             ++calls;
                             got = ec;
                             entries_at_handler = dir_entries(dir.path());
                             older_at_handler = fs::exists(out) && read_file(out) == to_bytes(older);
                             whole_at_handler = fs::exists(out) && !older_at_handler &&
                                                written_file(out).tensor("a") == a;
                             CHECK(n == (ec ? 0 : a.size()));
                         }));
        io.run();
        uring::write_cancel_fault = nullptr;
        at_submission = nullptr;
        REQUIRE(calls == 1);
        if (!fired) {  // past the finish's last ring operation: an undisturbed finish
            CHECK_FALSE(got);
            CHECK(k >= 2);  // at least the header write and the rename / link were seen
            break;
        }
        if (!got) {
            CHECK(entries_at_handler == std::vector<std::string>{"f.safetensors"});  // no temporary beside it
            CHECK(whole_at_handler);
            CHECK(st.message.empty());
            outcomes.push_back("published");
        } else {
            CHECK(got == net::error::operation_aborted);
            if (replace) {  // the older file, untouched, and no temporary beside it
                CHECK(entries_at_handler == std::vector<std::string>{"f.safetensors"});
                CHECK(older_at_handler);
            } else {
                CHECK(entries_at_handler.empty());
            }
            CHECK_THAT(st.message, Catch::Contains(out) && Catch::Contains("cancelled"));
            outcomes.push_back("aborted");
        }
        w.reset();
        io.restart();
        io.run();  // the writer's own teardown, if any
        CHECK(dir_entries(dir.path()) == entries_at_handler);
        fs::remove(out);
    }
    INFO(outcomes.size() << " outcomes");
    if (close_writer) {
        // Closing the writer never stops a finish it already queued.
        CHECK(std::count(outcomes.begin(), outcomes.end(), "aborted") == 0);
    } else {
        // Aborted while the rename / link was still to come; published from its submission on.
        const auto first_published = std::find(outcomes.begin(), outcomes.end(), "published");
        CHECK(first_published != outcomes.begin());
        CHECK(first_published != outcomes.end());
        CHECK(std::count(first_published, outcomes.end(), "aborted") == 0);
    }
}
