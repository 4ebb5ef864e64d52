// O_DIRECT file sources through include/ringsafe/asio.hpp: their reads run on
// the async ring (every completion is handled on the io_context's thread, none
// on a pool thread), tensors at unaligned file offsets land in unaligned and
// aligned buffers (guard zones around them untouched), reads end at an EOF
// that is not block aligned, short reads resume, and cancellation leaves no
// write after the handler. Where the filesystem refuses O_DIRECT, each case
// warns and returns, as the other O_DIRECT cases do.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include "checkpoint_bytes.hpp"
#include "ringsafe/asio.hpp"
#include "skip.hpp"
#include "uring/fault_injection.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace net = boost::asio;
namespace ra = ringsafe::asio;

namespace {

constexpr std::size_t page = 4096;
constexpr std::byte guard_byte{0x5A};

// The reader over `path` with O_DIRECT, or nullopt where the filesystem
// refuses it (`refused` then says why).
std::optional<reader> open_direct(const std::string& path, std::string& refused, reader_options ro = {}) {
    ro.source.file.direct = true;
    try {
        return reader::open(path, ro);
    } catch (const error& e) {
        if (e.code() != make_error_code(errc::InvalidArgument)) throw;
        refused = e.what();
        return std::nullopt;
    }
}

// Page-aligned memory filled with the guard byte, freed at scope exit.
struct arena {
    std::byte* p;
    std::size_t n;
    explicit arena(std::size_t bytes) : n((bytes + page - 1) / page * page) {
        p = static_cast<std::byte*>(std::aligned_alloc(page, n));
        REQUIRE(p);
        std::memset(p, static_cast<int>(guard_byte), n);
    }
    ~arena() { std::free(p); }
    arena(const arena&) = delete;
    arena& operator=(const arena&) = delete;
    bool holds(const std::byte* b) const { return b >= p && b < p + n; }
};

// Where each destination sits relative to its tensor's file offset.
enum class dst_placement { congruent, off_by_one, page_aligned };

// One destination per tensor in `a`, a guard page before and after each.
std::vector<std::span<std::byte>> place(arena& a, const std::vector<std::uint64_t>& file_offsets,
                                        const std::vector<std::uint64_t>& sizes, dst_placement how) {
    std::vector<std::span<std::byte>> out;
    std::size_t cursor = page;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        std::size_t shift = 0;
        if (how == dst_placement::congruent) shift = file_offsets[i] % page;
        if (how == dst_placement::off_by_one) shift = (file_offsets[i] + 1) % page;
        REQUIRE(cursor + shift + sizes[i] + page <= a.n);
        out.emplace_back(a.p + cursor + shift, sizes[i]);
        cursor = (cursor + shift + sizes[i] + page + page - 1) / page * page + page;
    }
    return out;
}

std::size_t arena_size(const std::vector<std::uint64_t>& sizes) {
    std::size_t n = page;
    for (auto s : sizes) n += s + 3 * page;
    return n;
}

// Every byte of `a` outside `dsts` still holds the guard byte.
bool guards_intact(const arena& a, const std::vector<std::span<std::byte>>& dsts) {
    std::vector<bool> inside(a.n, false);
    for (auto d : dsts)
        for (std::size_t k = 0; k < d.size(); ++k) inside[static_cast<std::size_t>(d.data() - a.p) + k] = true;
    for (std::size_t k = 0; k < a.n; ++k)
        if (!inside[k] && a.p[k] != guard_byte) return false;
    return true;
}

// What the completion hook saw.
struct completion_log {
    std::thread::id io_thread = std::this_thread::get_id();
    std::mutex m;
    bool off_thread = false;    // a completion handled on another thread (the pool)
    unsigned direct = 0, straight = 0, bounced = 0, past_eof = 0;
    void note(const uring::completion_event& ev, const arena& a, std::uint64_t file_size) {
        std::lock_guard lock(m);
        off_thread |= std::this_thread::get_id() != io_thread;
        direct += ev.direct;
        (a.holds(ev.buffer) ? straight : bounced) += 1;
        past_eof += ev.file_offset + ev.requested > file_size;
    }
};

struct layout {
    std::vector<std::uint64_t> offsets, sizes;  // absolute file offsets, sizes
};

layout layout_of(const reader& r, const selection& sel) {
    layout l;
    for (auto i : sel.indices()) {
        l.offsets.push_back(r.shards()[0].data_start + r.tensors()[i].begin);
        l.sizes.push_back(r.tensors()[i].size());
    }
    return l;
}

}  // namespace

TEST_CASE("asio direct: unaligned tensors land in unaligned and aligned buffers, on the ring", "[asio][direct]") {
    temp_dir dir;
    // 1.5 MiB crosses a bounce buffer's 1 MiB; the others are odd sizes at odd offsets.
    std::vector<tensor_spec> ts = {{"a", "U8", {1}, 1},           {"b", "U8", {4095}, 4095},
                                   {"c", "U8", {4097}, 4097},     {"d", "U8", {70001}, 70001},
                                   {"e", "U8", {1500000}, 1500000}, {"f", "U8", {8192}, 8192}};
    auto f = build_file(ts);
    write_file(dir / "m.safetensors", f.bytes);
    const auto how = GENERATE(dst_placement::congruent, dst_placement::off_by_one, dst_placement::page_aligned);
    const bool shorten = GENERATE(false, true);
    reader_options ro;
    ro.plan.chunk_size = 256u << 10;
    std::string refused;
    auto rd = open_direct((dir / "m.safetensors").string(), refused, ro);
    if (!rd) SKIP("no O_DIRECT here: " << refused);
    net::io_context io;
    ra::async_reader r(io.get_executor(), std::move(*rd));
    auto sel = r.get().all();
    const layout l = layout_of(r.get(), sel);
    arena a(arena_size(l.sizes));
    auto dsts = place(a, l.offsets, l.sizes, how);
    completion_log log;
    std::atomic<unsigned> seen{0};
    uring::scoped_completion_fault fault([&](const uring::completion_event& ev, int res) {
        log.note(ev, a, f.bytes.size());
        // Every other completion comes back shorter (still aligned), its later bytes spoiled.
        if (shorten && seen++ % 2 == 0 && res >= 8192) {
            const int cut = res / 2 / static_cast<int>(page) * static_cast<int>(page);
            std::memset(ev.buffer + cut, 0xEE, static_cast<std::size_t>(res - cut));
            return cut;
        }
        return res;
    });
    ra::error_code got = make_error_code(errc::IoError);
    std::size_t n = 0;
    ra::async_read(r, sel, dsts, [&](ra::error_code ec, std::size_t m) {
        got = ec;
        n = m;
    });
    io.run();
    REQUIRE_FALSE(got);
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < ts.size(); ++k) {
        INFO(ts[k].name);
        total += ts[k].bytes;
        auto want = tensor_bytes(ts[k].name, ts[k].bytes);
        CHECK(std::equal(dsts[k].begin(), dsts[k].end(), want.begin(), want.end()));
    }
    CHECK(n == total);
    CHECK(guards_intact(a, dsts));
    CHECK_FALSE(log.off_thread);  // the ring on the io_context's thread, not the blocking pool
    CHECK(log.direct == log.straight + log.bounced);
    CHECK(log.bounced > 0);  // unaligned heads and tails
    if (how == dst_placement::congruent) CHECK(log.straight > 0);  // aligned middles straight in
    if (how == dst_placement::off_by_one) CHECK(log.straight == 0);
}

TEST_CASE("asio direct: a read ending at an EOF that is not block aligned", "[asio][direct]") {
    temp_dir dir;
    std::vector<tensor_spec> ts = {{"x", "U8", {5000}, 5000}, {"last", "U8", {100003}, 100003}};
    auto f = build_file(ts);
    REQUIRE(f.bytes.size() % page != 0);
    write_file(dir / "m.safetensors", f.bytes);
    const auto how = GENERATE(dst_placement::congruent, dst_placement::off_by_one, dst_placement::page_aligned);
    const bool only_last = GENERATE(true, false);
    std::string refused;
    auto rd = open_direct((dir / "m.safetensors").string(), refused);
    if (!rd) SKIP("no O_DIRECT here: " << refused);
    net::io_context io;
    ra::async_reader r(io.get_executor(), std::move(*rd));
    auto sel = only_last ? r.get().select({"last"}) : r.get().all();
    const layout l = layout_of(r.get(), sel);
    REQUIRE(l.offsets.back() + l.sizes.back() == f.bytes.size());
    arena a(arena_size(l.sizes));
    auto dsts = place(a, l.offsets, l.sizes, how);
    completion_log log;
    uring::scoped_completion_fault fault([&](const uring::completion_event& ev, int res) {
        log.note(ev, a, f.bytes.size());
        return res;
    });
    ra::error_code got = make_error_code(errc::IoError);
    ra::async_read(r, sel, dsts, [&](ra::error_code ec, std::size_t) { got = ec; });
    io.run();
    REQUIRE_FALSE(got);
    for (std::size_t k = 0; k < sel.size(); ++k) {
        const auto& t = r.get().tensors()[sel.indices()[k]];
        INFO(t.name);
        auto want = tensor_bytes(t.name, t.size());
        CHECK(std::equal(dsts[k].begin(), dsts[k].end(), want.begin(), want.end()));
    }
    CHECK(guards_intact(a, dsts));
    CHECK_FALSE(log.off_thread);
    CHECK(log.past_eof > 0);  // the last block was asked for whole and came back short
}

TEST_CASE("asio direct: cancellation mid-read completes with operation_aborted and no later writes",
          "[asio][direct][cancel]") {
    temp_dir dir;
    write_file(dir / "big.safetensors", build_file({{"w", "U8", {8u << 20}, 8u << 20}}).bytes);
    const auto how = GENERATE(dst_placement::congruent, dst_placement::off_by_one);
    reader_options ro;
    ro.plan.chunk_size = 64u << 10;
    std::string refused;
    auto rd = open_direct((dir / "big.safetensors").string(), refused, ro);
    if (!rd) SKIP("no O_DIRECT here: " << refused);
    net::io_context io;
    ra::async_options ao;
    ao.queue_depth = 4;
    ra::async_reader r(io.get_executor(), std::move(*rd), ao);
    auto sel = r.get().all();
    const layout l = layout_of(r.get(), sel);
    arena a(arena_size(l.sizes));
    std::memset(a.p, 0xAB, a.n);  // the guard pattern, inside the destination too
    auto dsts = place(a, l.offsets, l.sizes, how);
    auto plan = r.get().plan(sel, dsts);
    REQUIRE(plan.op_count() >= 100);

    net::cancellation_signal signal;
    completion_log log;
    std::atomic<bool> handler_ran{false}, late_completion{false};
    std::atomic<unsigned> completions{0};
    uring::scoped_completion_fault fault([&](const uring::completion_event& ev, int res) {
        log.note(ev, a, ~std::uint64_t{0});
        if (handler_ran) late_completion = true;
        if (completions++ == 0) signal.emit(net::cancellation_type::terminal);
        return res;
    });
    ra::error_code got;
    std::size_t landed = 0;
    std::vector<std::byte> at_completion;
    ra::async_read(r, plan, net::bind_cancellation_slot(signal.slot(), [&](ra::error_code ec, std::size_t m) {
                       got = ec;
                       landed = m;
                       at_completion.assign(a.p, a.p + a.n);
                       handler_ran = true;
                   }));
    io.run();
    REQUIRE(handler_ran);
    CHECK(got == ra::error_code(net::error::operation_aborted));
    CHECK(landed < l.sizes[0]);
    // Give any straggling read time to land, then make sure none did.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    io.restart();
    io.poll();
    CHECK_FALSE(late_completion);
    CHECK(std::equal(a.p, a.p + a.n, at_completion.begin(), at_completion.end()));
    CHECK(std::count(dsts[0].begin(), dsts[0].end(), std::byte{0xAB}) > 0);  // it stopped midway
    CHECK_FALSE(log.off_thread);
}
