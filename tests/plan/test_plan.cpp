// The planner's pieces: glob matching, N-d boxes -> byte runs, coalescing and
// splitting into ops. Expected results are computed independently here.
#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "plan/box.hpp"
#include "plan/planner.hpp"
#include "ringsafe/selection.hpp"

using namespace ringsafe;
using plan::box_run;
using plan::piece;

TEST_CASE("glob: stars and question marks", "[plan][glob]") {
    CHECK(glob_match("*", ""));
    CHECK(glob_match("*", "model.layers.0.mlp.up.weight"));
    CHECK(glob_match("model.layers.*.mlp.*", "model.layers.12.mlp.down_proj.weight"));
    CHECK_FALSE(glob_match("model.layers.*.mlp.*", "model.layers.12.attn.q.weight"));
    CHECK(glob_match("a*b*c", "aXbYbc"));
    CHECK_FALSE(glob_match("a*b*c", "aXbYbcd"));
    CHECK(glob_match("w?", "w1"));
    CHECK_FALSE(glob_match("w?", "w"));
    CHECK_FALSE(glob_match("w?", "w12"));
    CHECK(glob_match("", ""));
    CHECK_FALSE(glob_match("", "a"));
    CHECK(glob_match("***", "abc"));
    // '?' is one UTF-8 character, not one byte.
    CHECK(glob_match("caf?", "caf\xc3\xa9"));
    CHECK_FALSE(glob_match("caf??", "caf\xc3\xa9"));
    // Pathological backtracking stays fast (linear star retry).
    std::string many(2000, 'a');
    CHECK_FALSE(glob_match("a*a*a*a*a*a*a*a*b", many));
}

TEST_CASE("glob: brackets and escapes", "[plan][glob]") {
    CHECK(glob_match("layer[0-2]", "layer1"));
    CHECK_FALSE(glob_match("layer[0-2]", "layer3"));
    CHECK(glob_match("layer[!0-2]", "layer3"));
    CHECK(glob_match("layer[^0-2]", "layer3"));
    CHECK_FALSE(glob_match("layer[!0-2]", "layer2"));
    CHECK(glob_match("[abc]x", "bx"));
    CHECK(glob_match("[]]", "]"));
    CHECK(glob_match("[!]]", "a"));
    CHECK_FALSE(glob_match("[!]]", "]"));
    CHECK(glob_match("[a-]", "-"));
    CHECK(glob_match("[\xc3\xa0-\xc3\xbf]", "\xc3\xa9"));  // a range of code points
    CHECK(glob_match("\\*", "*"));
    CHECK_FALSE(glob_match("\\*", "a"));
    CHECK(glob_match("a[", "a["));  // unclosed bracket: literal
    CHECK(glob_match("x\\", "x\\"));  // trailing backslash: literal
    CHECK(is_glob("a*"));
    CHECK(is_glob("a[1]"));
    CHECK_FALSE(is_glob("model.layers.0.weight"));
}

namespace {

tensor_info make_tensor(dtype dt, std::vector<std::uint64_t> shape) {
    tensor_info t;
    t.name = "t";
    t.dtype = dt;
    t.shape = std::move(shape);
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    t.begin = 0;
    t.end = n * dtype_bits(dt) / 8;
    return t;
}

// Independent reference: every element of the box in row-major order, as byte
// ranges, merged when consecutive.
std::vector<box_run> brute_runs(const tensor_info& t, const std::vector<dim_range>& box) {
    const std::size_t rank = t.shape.size();
    std::vector<std::uint64_t> idx(rank);
    std::vector<dim_range> full(rank);
    for (std::size_t d = 0; d < rank; ++d) full[d] = d < box.size() ? box[d] : dim_range{0, t.shape[d]};
    std::vector<box_run> out;
    for (auto& r : full)
        if (r.start == r.stop) return out;
    for (std::size_t d = 0; d < rank; ++d) idx[d] = full[d].start;
    const std::uint64_t esize = dtype_bits(t.dtype) / 8;
    for (;;) {
        std::uint64_t lin = 0;
        for (std::size_t d = 0; d < rank; ++d) lin = lin * t.shape[d] + idx[d];
        if (!out.empty() && out.back().offset + out.back().length == lin * esize)
            out.back().length += esize;
        else
            out.push_back({lin * esize, esize});
        std::size_t d = rank;
        while (d > 0) {
            --d;
            if (++idx[d] < full[d].stop) break;
            idx[d] = full[d].start;
            if (d == 0) return out;
        }
        if (rank == 0) return out;
    }
}

bool same_runs(const std::vector<box_run>& a, const std::vector<box_run>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].offset != b[i].offset || a[i].length != b[i].length) return false;
    return true;
}

}  // namespace

TEST_CASE("box: the fewest runs, checked against element-wise gathering", "[plan][box]") {
    auto t = make_tensor(dtype::F32, {4, 5, 6});
    SECTION("fixed cases") {
        std::vector<std::vector<dim_range>> boxes = {
            {},                                // whole tensor: one run
            {{1, 3}},                          // rows: one run
            {{1, 3}, {0, 5}, {2, 4}},          // inner slab
            {{0, 4}, {1, 2}},                  // middle dim
            {{2, 3}, {4, 5}, {5, 6}},          // one element
            {{0, 4}, {0, 5}, {0, 6}},          // explicit whole
        };
        for (auto& b : boxes) {
            auto got = plan::box_runs(t, b);
            CHECK(same_runs(got, brute_runs(t, b)));
        }
        CHECK(plan::box_runs(t, {}).size() == 1);
        CHECK(plan::box_runs(t, std::vector<dim_range>{{1, 3}}).size() == 1);
        CHECK(plan::box_runs(t, std::vector<dim_range>{{1, 3}, {0, 5}, {2, 4}}).size() == 10);
    }
    SECTION("random boxes") {
        std::mt19937 rng(7);
        auto t2 = make_tensor(dtype::BF16, {3, 1, 4, 7});
        for (int iter = 0; iter < 500; ++iter) {
            std::vector<dim_range> b;
            std::size_t dims = rng() % 5;
            for (std::size_t d = 0; d < dims; ++d) {
                std::uint64_t n = t2.shape[d];
                std::uint64_t s = rng() % (n + 1), e = rng() % (n + 1);
                if (s > e) std::swap(s, e);
                b.push_back({s, e});
            }
            INFO("iteration " << iter);
            CHECK(same_runs(plan::box_runs(t2, b), brute_runs(t2, b)));
        }
    }
}

TEST_CASE("box: invalid boxes are refused with InvalidArgument", "[plan][box]") {
    auto t = make_tensor(dtype::F32, {4, 5});
    auto kind = [&](std::vector<dim_range> b) {
        try {
            plan::box_runs(t, b);
        } catch (const error& e) {
            CHECK(std::string(e.what()).find("'t'") != std::string::npos);
            return std::string(e.kind());
        }
        return std::string("ok");
    };
    CHECK(kind({{0, 5}}) == "InvalidArgument");          // beyond dim 0
    CHECK(kind({{3, 2}}) == "InvalidArgument");          // reversed
    CHECK(kind({{0, 1}, {0, 1}, {0, 1}}) == "InvalidArgument");  // too many ranges
    CHECK(kind({{2, 2}}) == "ok");                       // empty: no runs
    CHECK(plan::box_runs(t, std::vector<dim_range>{{2, 2}}).empty());
    auto scalar = make_tensor(dtype::F64, {});
    CHECK(plan::box_runs(scalar, {}).size() == 1);
}

TEST_CASE("box: sub-byte dtypes only on byte boundaries", "[plan][box]") {
    auto f4 = make_tensor(dtype::F4, {4, 6});  // 3 bytes per row
    auto runs = plan::box_runs(f4, std::vector<dim_range>{{1, 3}});
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].offset == 3);
    CHECK(runs[0].length == 6);
    CHECK_THROWS_AS(plan::box_runs(f4, std::vector<dim_range>{{0, 4}, {1, 3}}), error);
    auto odd = make_tensor(dtype::F4, {2, 3});  // 12 bits per row
    try {
        plan::box_runs(odd, std::vector<dim_range>{{1, 2}});
        FAIL("a row of 12 bits was accepted");
    } catch (const error& e) {
        CHECK(e.code() == make_error_code(errc::InvalidArgument));
    }
    auto f6 = make_tensor(dtype::F6_E2M3, {2, 4});  // 24 bits per row
    CHECK(plan::box_runs(f6, std::vector<dim_range>{{1, 2}}).at(0).offset == 3);
}

namespace {

struct planned {
    detail::plan_data d;
    // Per target: bytes covered by segments.
    std::map<std::uint32_t, std::uint64_t> seg_bytes;
};

planned plan_pieces(std::vector<piece> pieces, std::uint64_t chunk, bool coalesce = true,
                    std::uint64_t align = 1, std::size_t shards = 2) {
    planned p;
    std::vector<plan::shard_chunking> ch(shards, {chunk, align});
    plan::build_ops(pieces, ch, coalesce, p.d);
    for (auto& s : p.d.segments) p.seg_bytes[s.target] += s.bytes;
    return p;
}

}  // namespace

TEST_CASE("planner: coalesces only when source and destination are both adjacent", "[plan]") {
    std::vector<std::byte> mem(1000);
    std::byte* m = mem.data();
    // Targets 0,1 adjacent in both; target 2 adjacent in the source only.
    std::vector<piece> pieces = {
        {0, 0, 100, 50, m + 0, 0},
        {0, 1, 150, 30, m + 50, 0},
        {0, 2, 180, 20, m + 500, 0},
    };
    auto p = plan_pieces(pieces, 1 << 20);
    REQUIRE(p.d.shards.size() == 1);
    auto& ops = p.d.shards[0].ops;
    REQUIRE(ops.size() == 2);
    CHECK(ops[0].offset == 100);
    CHECK(ops[0].length == 80);
    CHECK(ops[0].dst == m);
    CHECK(ops[1].offset == 180);
    CHECK(ops[1].dst == m + 500);
    CHECK(p.d.total_bytes == 100);
    CHECK(p.seg_bytes[0] == 50);
    CHECK(p.seg_bytes[1] == 30);
    CHECK(p.seg_bytes[2] == 20);
    // Op 0 carries two segments, op 1 one.
    CHECK(p.d.shards[0].seg_begin == std::vector<std::uint32_t>{0, 2, 3});

    auto off = plan_pieces(pieces, 1 << 20, /*coalesce=*/false);
    CHECK(off.d.shards[0].ops.size() == 3);
}

TEST_CASE("planner: splits long runs into chunks, cutting on alignment", "[plan]") {
    std::vector<std::byte> mem(10 << 20);
    std::vector<piece> pieces = {{0, 0, 8 + 1000, 10u << 20, mem.data(), 0}};
    auto p = plan_pieces(pieces, 4u << 20);
    auto& ops = p.d.shards[0].ops;
    REQUIRE(ops.size() == 3);
    CHECK(ops[0].length == 4u << 20);
    CHECK(ops[1].length == 4u << 20);
    CHECK(ops[2].length == 2u << 20);
    CHECK(ops[1].dst == mem.data() + (4u << 20));
    for (std::size_t i = 0; i < ops.size(); ++i) CHECK(ops[i].tag == i);

    auto a = plan_pieces(pieces, 4u << 20, true, 4096);
    auto& aops = a.d.shards[0].ops;
    std::uint64_t sum = 0;
    for (std::size_t i = 0; i < aops.size(); ++i) {
        if (i) CHECK(aops[i].offset % 4096 == 0);  // interior cuts are aligned
        CHECK(aops[i].length <= (4u << 20));
        CHECK(aops[i].dst == mem.data() + (aops[i].offset - 1008));
        sum += aops[i].length;
    }
    CHECK(sum == (10u << 20));
    CHECK(a.seg_bytes[0] == (10u << 20));
}

TEST_CASE("planner: segments follow targets across coalesced and split ops", "[plan]") {
    std::vector<std::byte> mem(100);
    std::vector<piece> pieces;
    // 10 targets of 10 bytes, contiguous everywhere; chunk 7 -> ops cut through targets.
    for (std::uint32_t t = 0; t < 10; ++t) pieces.push_back({0, t, 10u * t, 10, mem.data() + 10 * t, 0});
    auto p = plan_pieces(pieces, 7);
    auto& so = p.d.shards[0];
    CHECK(so.ops.size() == 15);
    for (std::uint32_t t = 0; t < 10; ++t) CHECK(p.seg_bytes[t] == 10);
    // Each op's segments add up to the op's length.
    for (std::size_t i = 0; i < so.ops.size(); ++i) {
        std::uint64_t n = 0;
        for (auto s = so.seg_begin[i]; s < so.seg_begin[i + 1]; ++s) n += p.d.segments[s].bytes;
        CHECK(n == so.ops[i].length);
    }
}

TEST_CASE("planner: shards apart, zero-length pieces dropped, overlap found", "[plan]") {
    std::vector<std::byte> mem(100);
    std::byte* m = mem.data();
    std::vector<piece> pieces = {
        {1, 1, 0, 10, m + 10, 0},
        {0, 0, 10, 10, m + 0, 0},
        {0, 2, 20, 0, m + 20, 0},
    };
    auto p = plan_pieces(pieces, 1 << 20);
    REQUIRE(p.d.shards.size() == 2);
    CHECK(p.d.shards[0].shard == 0);
    CHECK(p.d.shards[1].shard == 1);
    CHECK(p.d.op_count == 2);
    CHECK(p.d.shards[1].seg_begin == std::vector<std::uint32_t>{1, 2});

    CHECK_FALSE(plan::find_overlap(pieces));
    pieces.push_back({0, 3, 50, 5, m + 15, 0});
    auto o = plan::find_overlap(pieces);
    REQUIRE(o);
    CHECK(((o->first == 1 && o->second == 3) || (o->first == 3 && o->second == 1)));
}

TEST_CASE("planner: overlap found whatever the order of the destinations", "[plan]") {
    std::vector<std::byte> mem(100);
    std::byte* m = mem.data();
    // In memory order (checked pairwise, no sorted copy) and out of it.
    std::vector<piece> ordered = {{0, 0, 0, 10, m, 0}, {0, 1, 10, 30, m + 10, 0}, {0, 2, 40, 5, m + 39, 0}};
    auto o = plan::find_overlap(ordered);
    REQUIRE(o);
    CHECK(o->first == 1);
    CHECK(o->second == 2);
    ordered[2].dst = m + 40;
    CHECK_FALSE(plan::find_overlap(ordered));
    std::vector<piece> shuffled = {{0, 0, 0, 10, m + 50, 0}, {0, 1, 10, 30, m, 0}, {0, 2, 40, 5, m + 29, 0}};
    o = plan::find_overlap(shuffled);
    REQUIRE(o);
    CHECK(((o->first == 1 && o->second == 2) || (o->first == 2 && o->second == 1)));
    shuffled[2].dst = m + 30;
    CHECK_FALSE(plan::find_overlap(shuffled));
}
