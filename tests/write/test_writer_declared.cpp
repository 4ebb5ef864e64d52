// Tests for ringsafe::declared_writer (include/ringsafe/writer.hpp): byte-exact
// reproduction of the reference writer's files, concurrent out-of-order
// producers, completeness checks, non-seekable sinks.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <atomic>
#include <fstream>
#include <numeric>
#include <thread>

#include "ringsafe/mapped_file.hpp"
#include "ringsafe/writer.hpp"
#include "written_file.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

TEST_CASE("declared mode reproduces the reference writer's files byte for byte") {
    auto dir = conformance_dir() / "valid";
    std::ifstream lines(dir / "expected.jsonl");
    REQUIRE(lines);
    temp_dir d;
    int compared = 0;
    for (std::string line; std::getline(lines, line);) {
        auto v = boost::json::parse(line).as_object();
        if (!v["reference_writer"].as_bool()) continue;
        if (v["metadata"].is_object() && v["metadata"].as_object().size() > 1) continue;
        std::string file(v["file"].as_string());
        INFO(file);
        auto original = read_file(dir / file);
        auto hdr = parse_file(original);
        // The reference's order (ties between zero-size tensors differ from data order).
        std::vector<tensor_entry> order;
        for (auto& t : hdr.tensors) order.push_back({t.name, t.dtype, t.shape, t.begin, t.end});
        std::stable_sort(order.begin(), order.end(), reference_writer_order);
        std::vector<tensor_decl> decls;
        for (auto& t : order) decls.push_back({t.name, t.dtype, t.shape});
        std::optional<metadata_map> meta = hdr.metadata;
        auto out = d / file;
        {
            declared_writer w(out.string(), decls, meta ? &*meta : nullptr);
            // Feed tensors last to first to show the order of arrival does not matter.
            for (auto i = hdr.tensors.size(); i-- > 0;) {
                auto& t = hdr.tensors[i];
                std::span<const std::byte> bytes(original.data() + hdr.data_start() + t.begin, t.size());
                w.write(t.name, 0, bytes);
            }
            w.finish();
        }
        CHECK(read_file(out) == original);
        ++compared;
    }
    CHECK(compared >= 30);
}

TEST_CASE("declared mode: the header follows reference_writer_order when the caller sorts by it") {
    std::vector<tensor_entry> e{{"b", dtype::U8, {1}, 0, 0}, {"a", dtype::U8, {1}, 0, 0}, {"z", dtype::F64, {1}, 0, 0}};
    std::sort(e.begin(), e.end(), reference_writer_order);
    CHECK(e[0].name == "z");
    CHECK(e[1].name == "a");
}

TEST_CASE("declared mode: several threads write pieces in any order") {
    temp_dir d;
    auto p = d / "threads.safetensors";
    std::vector<tensor_decl> decls;
    std::vector<std::vector<std::byte>> data;
    for (int i = 0; i < 16; ++i) {
        std::uint64_t n = 50000 + 1013 * i;
        decls.push_back({"rank" + std::to_string(i), dtype::U8, {n}});
        data.push_back(pattern(n, 40 + i));
    }
    metadata_map meta{{"world", "4"}};
    declared_writer w(p.string(), decls, &meta);
    std::vector<std::thread> threads;
    for (int r = 0; r < 4; ++r) {
        threads.emplace_back([&, r] {
            // Each thread writes every 4th 4 KiB piece of every tensor, back to front.
            for (std::size_t i = 0; i < data.size(); ++i) {
                std::uint64_t n = data[i].size(), pieces = (n + 4095) / 4096;
                for (std::uint64_t k = pieces; k-- > 0;) {
                    if (static_cast<int>(k % 4) != r) continue;
                    std::uint64_t off = k * 4096, len = std::min<std::uint64_t>(4096, n - off);
                    w.write(i, off, std::span(data[i]).subspan(off, len));
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    w.finish();
    written_file f(p);
    for (std::size_t i = 0; i < data.size(); ++i) CHECK(f.tensor(decls[i].name) == data[i]);
    CHECK(f.hdr.metadata->at("world") == "4");
}

TEST_CASE("declared mode: an incomplete tensor is named at finish and nothing is published") {
    temp_dir d;
    auto p = d / "holes.safetensors";
    declared_writer w(p.string(), {{"full", dtype::U8, {10}}, {"holey", dtype::F32, {4}}, {"none", dtype::U8, {0}}});
    auto ten = pattern(10, 1), sixteen = pattern(16, 2);
    w.write("full", 0, ten);
    w.write("holey", 0, std::span(sixteen).first(4));
    w.write("holey", 8, std::span(sixteen).subspan(8));
    w.write("holey", 10, std::span(sixteen).subspan(10, 2));  // overlap counts once
    try {
        w.finish();
        FAIL("finish() should have thrown");
    } catch (const error& e) {
        CHECK(e.code() == make_error_code(errc::WriterState));
        CHECK_THAT(e.what(), Catch::Contains("'holey'") && Catch::Contains("12 of 16") && Catch::Contains("offset 4"));
    }
    CHECK_THROWS_AS(w.write("holey", 12, std::span(sixteen).first(8)), error);  // beyond the tensor
    CHECK_THROWS_AS(w.write("ghost", 0, ten), error);
    w.write("holey", 4, std::span(sixteen).subspan(4, 4));
    w.finish();
    written_file f(p);
    CHECK(f.tensor("holey") == sixteen);
}

TEST_CASE("declared mode validates declarations up front") {
    temp_dir d;
    auto p = (d / "bad.safetensors").string();
    CHECK_THROWS_WITH(declared_writer(p, {{"a", dtype::U8, {1}}, {"a", dtype::U8, {2}}}), Catch::Contains("'a'"));
    CHECK_THROWS_AS(declared_writer(p, {{"__metadata__", dtype::U8, {1}}}), error);
    CHECK_THROWS_AS(declared_writer(p, {{"odd", dtype::F6_E2M3, {3}}}), error);
    declared_options o;
    o.max_header_size = 64;
    CHECK_THROWS_AS(declared_writer(p, {{"a_rather_long_tensor_name_here", dtype::U8, {1}}, {"b", dtype::U8, {1}}},
                                    nullptr, o),
                    error);
    CHECK(dir_entries(d.path()).empty());
}

TEST_CASE("declared mode streams to a pipe in declared order") {
    std::vector<tensor_decl> decls{{"x", dtype::F32, {3, 5}}, {"y", dtype::U8, {0}}, {"z", dtype::I64, {7}}};
    auto x = pattern(60, 1), z = pattern(56, 2);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    std::vector<std::byte> received;
    std::thread reader([&] {
        std::byte buf[4096];
        ssize_t n;
        while ((n = ::read(fds[0], buf, sizeof buf)) > 0) received.insert(received.end(), buf, buf + n);
    });
    {
        declared_writer w(fds[1], decls);
        w.write("x", 0, std::span(x).first(20));
        CHECK_THROWS_AS(w.write("z", 0, z), error);  // out of order for a pipe
        w.write("x", 20, std::span(x).subspan(20));
        w.write("z", 0, z);
        w.finish();
    }
    ::close(fds[1]);
    reader.join();
    ::close(fds[0]);
    auto h = parse_file(received);
    REQUIRE(h.tensors.size() == 3);
    CHECK(std::equal(x.begin(), x.end(), received.begin() + static_cast<long>(h.data_start())));
    // Same bytes as the file form.
    temp_dir d;
    auto p = d / "same.safetensors";
    declared_writer f(p.string(), decls);
    f.write("z", 0, z);
    f.write("x", 0, x);
    f.finish();
    CHECK(read_file(p) == received);
}

TEST_CASE("declared mode: write_all writes the same bytes buffered and with O_DIRECT, on any thread count") {
    // Tensors of odd sizes (none aligned), one larger than a block, one empty, so
    // that blocks straddle the header and several tensors, and the file's end
    // needs the padding cut back.
    std::vector<tensor_decl> decls;
    std::vector<std::vector<std::byte>> data;
    const std::uint64_t sizes[] = {3, (9u << 20) + 77, 0, 4095, (3u << 20) + 1, 12345};
    for (std::size_t i = 0; i < std::size(sizes); ++i) {
        decls.push_back({"t" + std::to_string(i), dtype::U8, {sizes[i]}});
        data.emplace_back(sizes[i]);
        fill_pattern(data.back(), 100 + i);
    }
    std::vector<std::span<const std::byte>> spans(data.begin(), data.end());
    const metadata_map meta{{"format", "pt"}};
    temp_dir d;
    // The expected file: written piece by piece through write().
    const auto want_path = d / "want.safetensors";
    {
        declared_writer w(want_path.string(), decls, &meta);
        for (std::size_t i = 0; i < data.size(); ++i) w.write(i, 0, data[i]);
        w.finish();
    }
    const auto want = read_file(want_path);
    for (bool direct : {false, true})
        for (unsigned threads : {1u, 3u}) {
            INFO("direct " << direct << ", threads " << threads);
            const auto p = d / ("all-" + std::to_string(direct) + std::to_string(threads) + ".safetensors");
            std::atomic<std::uint64_t> last{0}, total{0};
            read_control ctl;
            ctl.on_progress = [&](std::uint64_t done, std::uint64_t t) {
                last = std::max<std::uint64_t>(last, done);
                total = t;
            };
            declared_options o;
            o.sync = o.sync_dir = direct;
            declared_writer w(p.string(), decls, &meta, o);
            const bool used = w.write_all(spans, threads, direct, ctl);
            CHECK(!fs::exists(p));  // nothing at the path before finish()
            w.finish();
            if (!direct) CHECK(!used);
            if (used) {  // straight to the disk: nothing of the file waits in the page cache
                const auto m = mapped_file::open(p.string());
                CHECK(m.resident_bytes({0, m.size()}) <= 4096);
            }
            CHECK(read_file(p) == want);
            CHECK(last == total);
            CHECK(total == std::accumulate(std::begin(sizes), std::end(sizes), std::uint64_t{0}));
        }
}

TEST_CASE("declared mode: write_all refuses wrong sizes and stops when cancelled, leaving nothing") {
    temp_dir d;
    const auto p = d / "x.safetensors";
    std::vector<std::byte> a(1000), b(20u << 20);
    {
        declared_writer w(p.string(), {{"a", dtype::U8, {1000}}, {"b", dtype::U8, {20u << 20}}});
        const std::vector<std::span<const std::byte>> short_b{a, std::span(b).first(10)};
        CHECK_THAT(kind_of([&] { w.write_all(short_b, 2, false); }),
                   Catch::Contains("InvalidArgument") && Catch::Contains("'b'"));
        const std::vector<std::span<const std::byte>> one{a};
        CHECK_THAT(kind_of([&] { w.write_all(one, 2, true); }), Catch::Contains("1 tensors given, 2 declared"));
    }
    for (bool direct : {false, true}) {
        std::atomic<bool> cancel{true};
        read_control ctl;
        ctl.cancel = &cancel;
        declared_writer w(p.string(), {{"a", dtype::U8, {1000}}, {"b", dtype::U8, {20u << 20}}});
        const std::vector<std::span<const std::byte>> both{a, b};
        CHECK_THAT(kind_of([&] { w.write_all(both, 2, direct, ctl); }), Catch::Contains("Cancelled"));
        CHECK_THROWS(w.finish());  // incomplete, or failed
    }
    CHECK(!fs::exists(p));
}
