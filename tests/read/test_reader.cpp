// The reader API over an in-memory source: listing, selection, per-tensor and
// packed reads, slices, plans, progress, cancellation and errors. Expected
// bytes come from the pattern the test file was built with.
#include <catch2/catch.hpp>

#include <cstring>
#include <mutex>
#include <set>

#include "checkpoint_bytes.hpp"
#include "memory_source.hpp"
#include "ringsafe/reader.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

const std::vector<tensor_spec> specs = {
    {"embed", "F32", {16, 8}, 16 * 8 * 4},
    {"layers.0.attn.q", "BF16", {8, 8}, 8 * 8 * 2},
    {"layers.0.mlp.up", "F16", {8, 24}, 8 * 24 * 2},
    {"layers.1.attn.q", "BF16", {8, 8}, 8 * 8 * 2},
    {"layers.1.mlp.up", "F16", {8, 24}, 8 * 24 * 2},
    {"empty", "F32", {0, 4}, 0},
    {"scale", "F64", {}, 8},
    {"cube", "I32", {3, 4, 5}, 3 * 4 * 5 * 4},
};

struct fixture {
    built_file file = build_file(specs);
    memory_source* src = nullptr;
    reader r;

    explicit fixture(std::size_t prefetch = 256u << 10, std::uint64_t chunk = 1u << 20)
        : r(make(prefetch, chunk)) {}

    reader make(std::size_t prefetch, std::uint64_t chunk) {
        auto s = std::make_unique<memory_source>("mem.safetensors", file.bytes, prefetch);
        s->hints_.preferred_chunk = chunk;
        src = s.get();
        return reader::from_source(std::move(s));
    }
};

std::vector<std::byte> guarded(std::size_t n) { return std::vector<std::byte>(n, std::byte{0xA5}); }

bool all_guard(std::span<const std::byte> v) {
    for (auto b : v)
        if (b != std::byte{0xA5}) return false;
    return true;
}

// Elements of a box of tensor `name` gathered one by one from its full bytes.
std::vector<std::byte> gather_box(const tensor_spec& t, const std::vector<dim_range>& box) {
    auto all = tensor_bytes(t.name, t.bytes);
    std::uint64_t elems = 1;
    for (auto d : t.shape) elems *= d;
    const std::uint64_t esize = elems ? t.bytes / elems : 0;
    std::vector<std::byte> out;
    for (std::uint64_t e = 0; e < elems; ++e) {
        std::uint64_t rest = e;
        bool inside = true;
        for (std::size_t d = t.shape.size(); d-- > 0;) {
            std::uint64_t i = rest % t.shape[d];
            rest /= t.shape[d];
            if (d < box.size() && (i < box[d].start || i >= box[d].stop)) inside = false;
        }
        if (inside) out.insert(out.end(), all.begin() + e * esize, all.begin() + (e + 1) * esize);
    }
    return out;
}

// memcmp that is defined for empty ranges too.
bool same_bytes(const std::byte* p, const std::vector<std::byte>& want) {
    return want.empty() || std::memcmp(p, want.data(), want.size()) == 0;
}

}  // namespace

TEST_CASE("reader: lists tensors in data order, finds them, one read for the header", "[reader]") {
    fixture f;
    REQUIRE(f.r.tensors().size() == specs.size());
    CHECK(f.src->read_exact_calls == 0);  // the header came from the prefix
    CHECK_FALSE(f.r.sharded());
    REQUIRE(f.r.shards().size() == 1);
    CHECK(f.r.shards()[0].data_start == f.file.data_start);
    CHECK(f.r.tensors()[0].name == "embed");
    for (std::size_t i = 1; i < f.r.tensors().size(); ++i)
        CHECK(f.r.tensors()[i - 1].begin <= f.r.tensors()[i].begin);
    CHECK(f.r.at("cube").shape == std::vector<std::uint64_t>{3, 4, 5});
    CHECK(f.r.find("nope") == nullptr);
    CHECK_FALSE(f.r.index_of("nope"));
    auto k = kind_of([&] { f.r.at("nope"); });
    CHECK(k.find("TensorNotFound") == 0);
    CHECK(k.find("'nope'") != std::string::npos);
    std::uint64_t total = 0;
    for (auto& s : specs) total += s.bytes;
    CHECK(f.r.total_bytes() == total);
    CHECK_FALSE(f.r.metadata());
}

TEST_CASE("reader: a header larger than the prefix takes exactly one more read", "[reader]") {
    fixture f(/*prefetch=*/24);
    CHECK(f.src->read_exact_calls == 1);
    CHECK(f.r.tensors().size() == specs.size());
}

TEST_CASE("reader: selections by names, globs and predicates", "[reader][select]") {
    fixture f;
    auto s = f.r.select({"cube", "embed"});
    REQUIRE(s.size() == 2);
    CHECK(f.r.tensors()[s.indices()[0]].name == "cube");  // caller's order kept
    CHECK(s.bytes() == 3 * 4 * 5 * 4 + 16 * 8 * 4);
    auto k = kind_of([&] { f.r.select({"embed", "missing.weight"}); });
    CHECK(k.find("TensorNotFound") == 0);
    CHECK(k.find("'missing.weight'") != std::string::npos);
    CHECK(kind_of([&] { f.r.select({"embed", "embed"}); }).find("InvalidArgument") == 0);

    auto g = f.r.select_glob("layers.*.mlp.*");
    std::set<std::string> names;
    for (auto i : g.indices()) names.insert(f.r.tensors()[i].name);
    CHECK(names == std::set<std::string>{"layers.0.mlp.up", "layers.1.mlp.up"});
    CHECK(f.r.select_glob(std::vector<std::string>{"layers.[1]*", "scale"}).size() == 3);
    CHECK(f.r.select_glob("nothing*").empty());
    auto p = f.r.select_if([](const tensor_info& t) { return t.dtype == dtype::BF16; });
    CHECK(p.size() == 2);
    CHECK(f.r.all().size() == specs.size());
}

TEST_CASE("reader: per-tensor buffers get exactly the tensors' bytes", "[reader][read]") {
    fixture f;
    auto sel = f.r.all();
    std::vector<std::vector<std::byte>> bufs;
    std::vector<std::span<std::byte>> dsts;
    for (auto i : sel.indices()) bufs.push_back(guarded(f.r.tensors()[i].size() + 16));
    for (auto& b : bufs) dsts.emplace_back(b);
    f.r.read(sel, dsts);
    for (std::size_t k = 0; k < sel.size(); ++k) {
        const auto& t = f.r.tensors()[sel.indices()[k]];
        auto want = tensor_bytes(t.name, t.size());
        INFO(t.name);
        CHECK(same_bytes(bufs[k].data(), want));
        CHECK(all_guard(std::span(bufs[k]).subspan(t.size())));  // nothing past the tensor
    }
}

TEST_CASE("reader: a too-small buffer is refused before any I/O", "[reader][read]") {
    fixture f;
    auto sel = f.r.select({"embed", "cube", "scale"});
    auto a = guarded(16 * 8 * 4), b = guarded(3 * 4 * 5 * 4 - 1), c = guarded(8);
    std::vector<std::span<std::byte>> dsts{a, b, c};
    auto k = kind_of([&] { f.r.read(sel, dsts); });
    CHECK(k.find("BufferTooSmall") == 0);
    CHECK(k.find("'cube'") != std::string::npos);
    CHECK(k.find("240") != std::string::npos);
    CHECK(k.find("239") != std::string::npos);
    CHECK(f.src->executed.empty());
    CHECK((all_guard(a) && all_guard(b) && all_guard(c)));
    std::vector<std::span<std::byte>> two{a, c};
    CHECK(kind_of([&] { f.r.plan(sel, two); }).find("InvalidArgument") == 0);
    auto big = guarded(4096);
    std::vector<std::span<std::byte>> overlapping{std::span(big).subspan(0, 512),
                                                  std::span(big).subspan(400, 240),
                                                  std::span(big).subspan(1000, 8)};
    auto o = kind_of([&] { f.r.plan(sel, overlapping); });
    CHECK(o.find("InvalidArgument") == 0);
    CHECK(o.find("overlap") != std::string::npos);
}

TEST_CASE("reader: packing into an arena with alignment", "[reader][read]") {
    fixture f;
    auto sel = f.r.select_glob(std::vector<std::string>{"layers.*", "scale", "cube"});
    for (std::uint64_t align : {1u, 64u, 4096u}) {
        INFO("alignment " << align);
        const std::uint64_t need = f.r.packed_size(sel, align);
        auto arena = guarded(need + 64);
        auto placed = f.r.read_packed(sel, std::span(arena).subspan(0, need), align);
        REQUIRE(placed.size() == sel.size());
        std::vector<bool> used(arena.size());
        for (std::size_t k = 0; k < placed.size(); ++k) {
            const auto& t = f.r.tensors()[placed[k].tensor];
            CHECK(placed[k].tensor == sel.indices()[k]);
            CHECK(placed[k].offset % align == 0);
            CHECK(placed[k].size == t.size());
            auto want = tensor_bytes(t.name, t.size());
            CHECK(same_bytes(arena.data() + placed[k].offset, want));
            for (std::uint64_t i = 0; i < t.size(); ++i) used[placed[k].offset + i] = true;
        }
        for (std::size_t i = 0; i < arena.size(); ++i)
            if (!used[i] && arena[i] != std::byte{0xA5}) FAIL("padding byte " << i << " written");
    }
    CHECK(kind_of([&] { f.r.packed_size(sel, 48); }).find("InvalidArgument") == 0);
    auto small = guarded(f.r.packed_size(sel, 64) - 1);
    auto k = kind_of([&] { f.r.read_packed(sel, small, 64); });
    CHECK(k.find("BufferTooSmall") == 0);
    CHECK(all_guard(small));
    CHECK(f.src->executed.size() == 3);  // only the three good reads
}

TEST_CASE("reader: adjacent tensors packed back to back coalesce into chunked ops", "[reader][plan]") {
    fixture f(256u << 10, /*chunk=*/256);
    auto sel = f.r.all();
    std::vector<std::byte> arena(f.r.packed_size(sel, 1));
    auto plan = f.r.plan_packed(sel, arena, 1);
    // One run over the whole data section, cut into 256-byte ops.
    CHECK(plan.op_count() == (f.r.total_bytes() + 255) / 256);
    f.r.execute(plan);
    REQUIRE(f.src->executed.size() == 1);
    for (auto& op : f.src->executed[0]) CHECK(op.length <= 256);
    auto want = std::span(f.file.bytes).subspan(f.file.data_start);
    CHECK(std::memcmp(arena.data(), want.data(), want.size()) == 0);
}

TEST_CASE("reader: row slices and boxes match element-wise gathering", "[reader][slice]") {
    fixture f;
    const tensor_spec& cube = specs[7];
    std::vector<std::vector<dim_range>> boxes = {
        {{1, 3}}, {{0, 3}, {1, 2}}, {{2, 3}, {0, 4}, {3, 5}}, {{0, 3}, {0, 4}, {4, 5}}, {{1, 1}}, {}};
    for (auto& box : boxes) {
        auto want = gather_box(cube, box);
        CHECK(f.r.box_bytes("cube", box) == want.size());
        auto dst = guarded(want.size() + 8);
        f.r.read_box("cube", box, dst);
        CHECK(same_bytes(dst.data(), want));
        CHECK(all_guard(std::span(dst).subspan(want.size())));
    }
    auto rows = guarded(2 * 8 * 4);
    f.r.read_rows("embed", 5, 7, rows);
    auto all = tensor_bytes("embed", 16 * 8 * 4);
    CHECK(std::memcmp(rows.data(), all.data() + 5 * 8 * 4, rows.size()) == 0);
    auto small = guarded(2 * 8 * 4 - 1);
    auto k = kind_of([&] { f.r.read_rows("embed", 5, 7, small); });
    CHECK(k.find("BufferTooSmall") == 0);
    CHECK(all_guard(small));
    CHECK(kind_of([&] { f.r.read_rows("embed", 5, 17, rows); }).find("InvalidArgument") == 0);
    CHECK(kind_of([&] { f.r.read_rows("scale", 0, 1, rows); }).find("InvalidArgument") == 0);

    // Two tensor-parallel ranks: each takes half the rows of every layer weight.
    std::vector<std::byte> r0(4 * 24 * 2), r1(4 * 24 * 2);
    std::vector<read_request> reqs{{"layers.0.mlp.up", {{0, 4}}, r0}, {"layers.0.mlp.up", {{4, 8}}, r1}};
    f.r.execute(f.r.plan(reqs));
    auto up = tensor_bytes("layers.0.mlp.up", 8 * 24 * 2);
    CHECK(std::memcmp(r0.data(), up.data(), r0.size()) == 0);
    CHECK(std::memcmp(r1.data(), up.data() + r0.size(), r1.size()) == 0);
}

TEST_CASE("reader: byte windows of a tensor", "[reader][slice]") {
    fixture f;
    auto all = tensor_bytes("embed", 16 * 8 * 4);
    std::vector<std::byte> a(100), b(412);
    read_request ra{"embed", {}, a, dim_range{0, 100}};
    read_request rb{"embed", {}, b, dim_range{100, 512}};
    std::vector<read_request> reqs{rb, ra};
    auto plan = f.r.plan(reqs);
    CHECK(plan.total_bytes() == 512);
    f.r.execute(plan);
    CHECK(std::memcmp(a.data(), all.data(), 100) == 0);
    CHECK(std::memcmp(b.data(), all.data() + 100, 412) == 0);
    read_request past{"embed", {}, b, dim_range{500, 513}};
    CHECK(kind_of([&] { f.r.plan(std::span(&past, 1)); }).find("InvalidArgument") == 0);
    read_request both{"embed", {{0, 1}}, b, dim_range{0, 4}};
    CHECK(kind_of([&] { f.r.plan(std::span(&both, 1)); }).find("InvalidArgument") == 0);
    read_request small{"embed", {}, a, dim_range{0, 101}};
    CHECK(kind_of([&] { f.r.plan(std::span(&small, 1)); }).find("BufferTooSmall") == 0);
}

TEST_CASE("reader: a plan runs many times; another reader's plan is refused", "[reader][plan]") {
    fixture f, g;
    auto sel = f.r.select({"embed", "layers.1.mlp.up"});
    std::vector<std::byte> a(16 * 8 * 4), b(8 * 24 * 2);
    std::vector<std::span<std::byte>> dsts{a, b};
    auto plan = f.r.plan(sel, dsts);
    CHECK(plan.target_count() == 2);
    CHECK(plan.total_bytes() == a.size() + b.size());
    for (int round = 0; round < 3; ++round) {
        std::fill(a.begin(), a.end(), std::byte{0});
        std::fill(b.begin(), b.end(), std::byte{0});
        f.r.execute(plan);
        CHECK(a == tensor_bytes("embed", a.size()));
        CHECK(b == tensor_bytes("layers.1.mlp.up", b.size()));
    }
    CHECK(f.src->executed.size() == 3);
    CHECK(kind_of([&] { g.r.execute(plan); }).find("InvalidArgument") == 0);
    CHECK(kind_of([&] { g.r.plan(sel, dsts); }).find("InvalidArgument") == 0);
    CHECK(g.src->executed.empty());
    status st;
    CHECK_FALSE(g.r.execute(plan, {}, st));
    CHECK(st.code == make_error_code(errc::InvalidArgument));
    CHECK(f.r.execute(read_plan{}, {}, st));  // an empty plan reads nothing
}

TEST_CASE("reader: progress and per-tensor completion", "[reader][progress]") {
    fixture f(256u << 10, /*chunk=*/100);
    f.src->piece = 37;
    auto sel = f.r.all();
    std::vector<std::byte> arena(f.r.packed_size(sel, 64));
    std::mutex m;
    std::uint64_t max_done = 0, calls = 0, total_seen = 0;
    std::vector<int> done_count(sel.size());
    bool complete_when_reported = true;
    read_plan plan = f.r.plan_packed(sel, arena, 64);
    read_control ctl;
    ctl.on_progress = [&](std::uint64_t d, std::uint64_t t) {
        std::lock_guard lk(m);
        max_done = std::max(max_done, d);
        total_seen = t;
        ++calls;
    };
    ctl.on_tensor_done = [&](std::size_t target, const tensor_info& t) {
        std::lock_guard lk(m);
        ++done_count[target];
        const auto& pl = plan.placements()[target];
        auto want = tensor_bytes(t.name, t.size());
        if (!same_bytes(arena.data() + pl.offset, want))
            complete_when_reported = false;
    };
    f.r.execute(plan, ctl);
    CHECK(max_done == f.r.total_bytes());
    CHECK(total_seen == f.r.total_bytes());
    CHECK(calls > 10);
    for (std::size_t k = 0; k < done_count.size(); ++k) CHECK(done_count[k] == 1);
    CHECK(complete_when_reported);
}

TEST_CASE("reader: cancellation before and during a read", "[reader][cancel]") {
    fixture f(256u << 10, /*chunk=*/64);
    f.src->piece = 16;
    auto sel = f.r.all();
    std::vector<std::byte> arena(f.r.packed_size(sel, 1));
    std::atomic<bool> stop{true};
    read_control ctl;
    ctl.cancel = &stop;
    CHECK(kind_of([&] { f.r.read_packed(sel, arena, 1, ctl); }).find("Cancelled") == 0);
    CHECK(f.src->executed.empty());

    stop = false;
    std::uint64_t last = 0;
    ctl.on_progress = [&](std::uint64_t d, std::uint64_t) {
        last = d;
        if (d >= 100) stop = true;
    };
    CHECK(kind_of([&] { f.r.read_packed(sel, arena, 1, ctl); }).find("Cancelled") == 0);
    CHECK(last < f.r.total_bytes());
}

TEST_CASE("reader: I/O errors name the tensor; a shrunk source reports Truncated", "[reader][errors]") {
    fixture f;
    const auto& up = f.r.at("layers.1.mlp.up");
    f.src->fail_at = f.file.data_start + up.begin + 10;
    std::vector<std::byte> buf(up.size());
    std::vector<std::span<std::byte>> dsts{buf};
    auto k = kind_of([&] { f.r.read(f.r.select({"layers.1.mlp.up"}), dsts); });
    CHECK(k.find("IoError") == 0);
    CHECK(k.find("'layers.1.mlp.up'") != std::string::npos);

    fixture g;
    g.src->truncate(g.file.data_start + 100);
    std::vector<std::byte> cube(g.r.at("cube").size());
    std::vector<std::span<std::byte>> d2{cube};
    auto t = kind_of([&] { g.r.read(g.r.select({"cube"}), d2); });
    CHECK(t.find("Truncated") == 0);
    CHECK(t.find("'cube'") != std::string::npos);
}

TEST_CASE("reader: invalid headers are refused with the source named", "[reader][errors]") {
    auto bytes = build_file(specs).bytes;
    bytes.resize(bytes.size() - 1);  // data section one byte short
    auto k = kind_of([&] { reader::from_source(std::make_unique<memory_source>("short.st", bytes)); });
    CHECK(k.find("MetadataIncompleteBuffer") == 0);
    CHECK(k.find("short.st") != std::string::npos);
    auto tiny = kind_of([&] {
        reader::from_source(std::make_unique<memory_source>("tiny.st", std::vector<std::byte>(3)));
    });
    CHECK(tiny.find("HeaderTooSmall") == 0);
}
