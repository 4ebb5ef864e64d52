// The reader over real files through open_source (io_uring): every conformance
// case, O_DIRECT and option variants, short reads at the executor's completion
// edge, a file truncated after open, and a multi-GiB sparse file.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "checkpoint_bytes.hpp"
#include "conformance_cases.hpp"
#include "ringsafe/reader.hpp"
#include "skip.hpp"
#include "uring/fault_injection.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

// Reads every tensor of `r` into its own buffer and checks it against the pattern.
void check_all_tensors(reader& r) {
    const auto bytes = read_tensors(r);
    for (const auto& t : r.tensors()) {
        INFO(t.name);
        CHECK(bytes.at(t.name) == tensor_bytes(t.name, t.size()));
    }
}

}  // namespace

TEST_CASE("reader: every valid conformance file reads back with the expected sha256", "[reader][conformance]") {
    auto cases = load_cases(conformance_dir() / "valid");
    REQUIRE(cases.size() >= 60);
    for (auto& c : cases) {
        INFO(c.file);
        std::optional<reader> r;
        try {
            r.emplace(reader::open(c.path.string()));
        } catch (const error& e) {
            const deviation* d = find_deviation(c.file);
            INFO(e.what());
            REQUIRE(d != nullptr);
            CHECK(e.kind() == d->error_kind);
            continue;
        }
        REQUIRE(r->tensors().size() == c.tensors.size());
        auto sel = r->all();
        std::vector<std::byte> arena(r->packed_size(sel, 8));
        auto placed = r->read_packed(sel, arena, 8);
        for (std::size_t i = 0; i < c.tensors.size(); ++i) {
            const auto& t = r->tensors()[i];
            INFO(c.tensors[i].name);
            CHECK(t.name == c.tensors[i].name);
            CHECK(t.shape == c.tensors[i].shape);
            CHECK(dtype_name(t.dtype) == c.tensors[i].dtype);
            CHECK(sha256_hex(std::span(arena).subspan(placed[i].offset, placed[i].size)) ==
                  c.tensors[i].sha256);
        }
        CHECK(r->metadata().has_value() == c.metadata.has_value());
    }
}

TEST_CASE("reader: every invalid conformance file is refused with its kind", "[reader][conformance]") {
    for (auto& c : load_cases(conformance_dir() / "invalid")) {
        INFO(c.file);
        auto k = kind_of([&] { reader::open(c.path.string()); });
        CHECK(k.find(c.error_kind + ":") == 0);
        CHECK(k.find(c.file) != std::string::npos);  // the message names the file
    }
}

TEST_CASE("reader: io_uring options, O_DIRECT and short reads give the same bytes", "[reader][files]") {
    temp_dir dir;
    auto path = (dir / "mixed.safetensors").string();
    write_file(path, build_file(mixed).bytes);
    SECTION("defaults") {
        reader r = reader::open(path);
        check_all_tensors(r);
    }
    SECTION("one thread, depth 1, 4 KiB chunks") {
        reader_options o;
        o.source.file.threads = 1;
        o.source.file.queue_depth = 1;
        o.plan.chunk_size = 4096;
        reader r = reader::open(path, o);
        check_all_tensors(r);
    }
    SECTION("O_DIRECT") {
        reader_options o;
        o.source.file.direct = true;
        std::optional<reader> r;
        try {
            r.emplace(reader::open(path, o));
        } catch (const error& e) {
            if (e.code() == std::error_code(EINVAL, std::system_category())) {
                SKIP("O_DIRECT not supported on " << dir.path());
            }
            throw;
        }
        check_all_tensors(*r);
    }
    SECTION("short reads injected at the completion edge are resumed") {
        std::atomic<int> shortened{0};
        uring::scoped_completion_fault fault([&](const uring::completion_event&, int res) {
            if (res > 4096) {
                ++shortened;
                return res / 3;
            }
            return res;
        });
        reader r = reader::open(path);
        check_all_tensors(r);
        CHECK(shortened > 0);
    }
}

TEST_CASE("reader: a file truncated after open gives Truncated naming it", "[reader][files]") {
    temp_dir dir;
    auto path = (dir / "shrinks.safetensors").string();
    auto f = build_file(mixed);
    write_file(path, f.bytes);
    reader r = reader::open(path);
    std::filesystem::resize_file(path, f.data_start + 5000);
    std::vector<std::byte> d(r.at("d").size());
    std::vector<std::span<std::byte>> dsts{d};
    auto k = kind_of([&] { r.read(r.select({"d"}), dsts); });
    CHECK(k.find("Truncated") == 0);
    CHECK(k.find(path) != std::string::npos);
    CHECK(k.find("'d'") != std::string::npos);
}

TEST_CASE("reader: cancellation and progress through io_uring", "[reader][files]") {
    temp_dir dir;
    auto path = (dir / "mixed.safetensors").string();
    write_file(path, build_file(mixed).bytes);
    reader_options o;
    o.plan.chunk_size = 4096;
    o.source.file.queue_depth = 2;
    o.source.file.threads = 1;
    reader r = reader::open(path, o);
    auto sel = r.all();
    std::vector<std::byte> arena(r.packed_size(sel, 64));
    std::atomic<std::uint64_t> seen{0};
    std::atomic<int> done{0};
    read_control ctl;
    ctl.on_progress = [&](std::uint64_t d, std::uint64_t) {
        for (auto cur = seen.load(); d > cur && !seen.compare_exchange_weak(cur, d);) {
        }
    };
    ctl.on_tensor_done = [&](std::size_t, const tensor_info&) { ++done; };
    r.read_packed(sel, arena, 64, ctl);
    CHECK(seen == r.total_bytes());
    CHECK(done == static_cast<int>(sel.size()));

    std::atomic<bool> stop{false};
    read_control c2;
    c2.cancel = &stop;
    c2.on_progress = [&](std::uint64_t, std::uint64_t) { stop = true; };
    CHECK(kind_of([&] { r.read_packed(sel, arena, 64, c2); }).find("Cancelled") == 0);
}

TEST_CASE("reader: slices at offsets beyond 4 GiB of a sparse file", "[reader][files][large]") {
    temp_dir dir;
    auto path = (dir / "sparse.safetensors").string();
    const std::uint64_t row = 1ull << 30;
    // 5 GiB of U8 rows, then a small tensor: only the header and two patches are
    // written, the rest is a hole that reads as zeros.
    auto f = build_header({{"big", "U8", {5, row}, 5 * row}, {"tail", "F32", {1024}, 4096}});
    write_file(path, f.bytes);
    std::filesystem::resize_file(path, f.data_start + 5 * row + 4096);
    int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    auto patch = tensor_bytes("big-end", 4096);
    auto tail = tensor_bytes("tail", 4096);
    REQUIRE(::pwrite(fd, patch.data(), 4096, static_cast<off_t>(f.data_start + 5 * row - 4096)) == 4096);
    REQUIRE(::pwrite(fd, tail.data(), 4096, static_cast<off_t>(f.data_start + 5 * row)) == 4096);
    ::close(fd);

    reader r = reader::open(path);
    CHECK(r.at("tail").begin == 5 * row);
    std::vector<dim_range> box{{2, 5}, {row - 4096, row}};
    REQUIRE(r.box_bytes("big", box) == 3 * 4096);
    std::vector<std::byte> got(3 * 4096 + 4096, std::byte{0x5A});
    std::vector<read_request> reqs{{"big", box, std::span(got).subspan(0, 3 * 4096)},
                                   {"tail", {}, std::span(got).subspan(3 * 4096)}};
    auto plan = r.plan(reqs);
    CHECK(plan.op_count() == 3);  // rows 4's end and the tail coalesce: adjacent in file and memory
    r.execute(plan);
    CHECK(std::all_of(got.begin(), got.begin() + 2 * 4096, [](std::byte b) { return b == std::byte{0}; }));
    CHECK(std::memcmp(got.data() + 2 * 4096, patch.data(), 4096) == 0);
    CHECK(std::memcmp(got.data() + 3 * 4096, tail.data(), 4096) == 0);
}
