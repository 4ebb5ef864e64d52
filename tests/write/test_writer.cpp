// Tests for include/ringsafe/writer.hpp: streaming and append modes, input
// validation, publishing, relocation. Declared mode: test_writer_declared.cpp.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>

#include "ringsafe/writer.hpp"
#include "written_file.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

struct sample {
    std::string name;
    dtype t;
    std::vector<std::uint64_t> shape;
    std::vector<std::byte> data;
};

std::vector<sample> every_dtype_samples() {
    std::vector<sample> out;
    for (int i = 0; i < dtype_count; ++i) {
        auto t = static_cast<dtype>(i);
        std::vector<std::uint64_t> shape{3, 8};  // 24 elements: whole bytes for 4- and 6-bit types
        std::uint64_t n = *dtype_bytes_for(t, 24);
        out.push_back({"t_" + std::string(dtype_name(t)), t, shape, pattern(n, i)});
    }
    out.push_back({"empty", dtype::F32, {0}, {}});
    out.push_back({"empty2d", dtype::BF16, {4, 0}, {}});
    out.push_back({"scalar", dtype::F64, {}, pattern(8, 99)});
    out.push_back({"größe.日本語.🙂", dtype::U8, {5}, pattern(5, 100)});
    out.push_back({"quote\"back\\slash\ncontrol", dtype::I16, {2}, pattern(4, 101)});
    return out;
}

void check_round_trip(const fs::path& p, const std::vector<sample>& samples, const metadata_map* meta) {
    written_file f(p);
    REQUIRE(f.hdr.tensors.size() == samples.size());
    for (auto& s : samples) {
        const auto& t = f.hdr.at(s.name);
        CHECK(t.dtype == s.t);
        CHECK(t.shape == s.shape);
        CHECK(f.tensor(s.name) == s.data);
    }
    if (meta) {
        REQUIRE(f.hdr.metadata);
        CHECK(*f.hdr.metadata == *meta);
    } else {
        CHECK_FALSE(f.hdr.metadata);
    }
}

}  // namespace

TEST_CASE("streaming round trip: every dtype, empty tensors, scalar, unicode names, metadata") {
    temp_dir d;
    auto samples = every_dtype_samples();
    metadata_map meta{{"format", "pt"}, {"ключ", "значение"}};
    for (bool direct : {true, false}) {
        auto p = d / (direct ? "direct.safetensors" : "buffered.safetensors");
        writer_options o;
        o.direct = direct;
        writer w(p.string(), o);
        for (auto& s : samples) w.add(s.name, s.t, s.shape, s.data);
        CHECK_FALSE(fs::exists(p));  // nothing at the target before finish
        w.finish(meta);
        check_round_trip(p, samples, &meta);
        CHECK(w.stats().tensors == samples.size());
        CHECK(w.stats().relocation.empty());
        CHECK((8 + w.stats().header_reserved) % 4096 == 0);
        CHECK(w.stats().file_size == fs::file_size(p));
    }
    CHECK(dir_entries(d.path()).size() == 2);  // no temporaries left
}

TEST_CASE("streaming without metadata writes no __metadata__ entry") {
    temp_dir d;
    writer w((d / "a.safetensors").string());
    auto x = pattern(12, 1);
    w.add("x", dtype::F32, {3}, x);
    w.finish();
    check_round_trip(d / "a.safetensors", {{"x", dtype::F32, {3}, x}}, nullptr);
}

TEST_CASE("chunked tensors across many small blocks, O_DIRECT and buffered") {
    temp_dir d;
    for (bool direct : {true, false}) {
        auto p = d / "chunked.safetensors";
        writer_options o;
        o.direct = direct;
        o.block_size = 8192;  // tiny blocks: many writes, staging reuse, padded tail
        o.staging_blocks = 2;
        o.queue_depth = 2;
        writer w(p.string(), o);
        std::vector<sample> samples;
        for (int k = 0; k < 5; ++k) {
            std::uint64_t n = 30001 + 977 * k;  // odd sizes: nothing aligned
            sample s{"c" + std::to_string(k), dtype::U8, {n}, pattern(n, 10 + k)};
            w.begin(s.name, s.t, s.shape);
            for (std::uint64_t off = 0; off < n;) {
                std::uint64_t step = std::min<std::uint64_t>(n - off, 1 + (off * 7919) % 5000);
                w.append(std::span(s.data).subspan(off, step));
                off += step;
            }
            w.end();
            samples.push_back(std::move(s));
        }
        w.finish();
        check_round_trip(p, samples, nullptr);
        CHECK(w.stats().staging_peak <= 2 * 8192);
        CHECK(w.stats().direct == direct);
    }
}

TEST_CASE("zero-copy adds write from caller memory and hold it until completion") {
    temp_dir d;
    for (bool direct : {true, false}) {
        auto p = d / "zc.safetensors";
        writer_options o;
        o.direct = direct;
        o.block_size = 1 << 20;
        writer w(p.string(), o);
        std::vector<sample> samples;
        std::weak_ptr<void> watch;
        for (int k = 0; k < 4; ++k) {
            std::uint64_t n = (4u << 20) + (k == 3 ? 100 : 0);  // page-sized tensors keep offsets aligned
            auto mem = std::shared_ptr<std::byte>(static_cast<std::byte*>(std::aligned_alloc(4096, (n + 2 * 4096 - 1) / 4096 * 4096)), std::free);
            fill_pattern(std::span(mem.get(), n), 20 + k);
            sample s{"z" + std::to_string(k), dtype::U8, {n}, std::vector<std::byte>(mem.get(), mem.get() + n)};
            w.add(s.name, s.t, s.shape, std::span<const std::byte>(mem.get(), n), mem);
            if (k == 0) watch = mem;
            samples.push_back(std::move(s));
        }
        w.finish();
        CHECK(watch.expired());  // the writer let go of the caller's buffer
        check_round_trip(p, samples, nullptr);
        CHECK(w.stats().zero_copy_bytes >= 3 * (4u << 20));
    }
}

TEST_CASE("inputs are validated before anything is written, and the writer stays usable") {
    temp_dir d;
    auto p = d / "v.safetensors";
    writer w(p.string());
    auto four = pattern(4, 1);
    w.add("a", dtype::U8, {4}, four);
    auto kind = [](auto&& f) {
        try {
            f();
        } catch (const error& e) {
            return std::string(e.kind()) + "|" + e.what();
        }
        return std::string("no error");
    };
    CHECK_THAT(kind([&] { w.add("a", dtype::U8, {4}, four); }), Catch::StartsWith("DuplicateTensorName") && Catch::Contains("'a'"));
    CHECK_THAT(kind([&] { w.add("__metadata__", dtype::U8, {4}, four); }), Catch::StartsWith("InvalidArgument"));
    CHECK_THAT(kind([&] { w.add("b", dtype::F32, {2}, four); }), Catch::StartsWith("TensorInvalidInfo") && Catch::Contains("'b'"));
    CHECK_THAT(kind([&] { w.add("c", dtype::F4, {3}, four); }), Catch::StartsWith("MisalignedSlice") && Catch::Contains("'c'"));
    CHECK_THAT(kind([&] { w.add("d", dtype::U8, {1ull << 62, 8}, four); }), Catch::StartsWith("ValidationOverflow"));
    CHECK_THAT(kind([&] { w.add("e", dtype::U16, {1ull << 62}, four); }), Catch::StartsWith("ValidationOverflow"));
    CHECK_THAT(kind([&] { w.add(std::string("bad\xff", 4), dtype::U8, {4}, four); }), Catch::StartsWith("InvalidArgument") && Catch::Contains("UTF-8"));
    CHECK_THAT(kind([&] { w.append(four); }), Catch::StartsWith("WriterState"));
    CHECK_THAT(kind([&] { w.end(); }), Catch::StartsWith("WriterState"));
    w.begin("f", dtype::U8, {8});
    w.append(four);
    CHECK_THAT(kind([&] { w.end(); }), Catch::StartsWith("WriterState") && Catch::Contains("4 of its 8"));
    CHECK_THAT(kind([&] { w.add("g", dtype::U8, {4}, four); }), Catch::StartsWith("WriterState") && Catch::Contains("'f'"));
    CHECK_THAT(kind([&] { w.append(pattern(5, 2)); }), Catch::StartsWith("TensorInvalidInfo"));
    CHECK_THAT(kind([&] { w.finish(); }), Catch::StartsWith("WriterState") && Catch::Contains("'f'"));
    w.append(four);
    w.end();
    metadata_map bad{{"k", std::string("\xc0\xaf", 2)}};
    CHECK_THAT(kind([&] { w.finish(bad); }), Catch::StartsWith("InvalidArgument"));
    w.finish();
    written_file f(p);
    CHECK(f.hdr.tensors.size() == 2);  // a and f only
    CHECK(f.tensor("f") == std::vector<std::byte>{four[0], four[1], four[2], four[3], four[0], four[1], four[2], four[3]});
    CHECK_THAT(kind([&] { w.add("h", dtype::U8, {4}, four); }), Catch::StartsWith("WriterState"));
}

TEST_CASE("a header above the size cap is refused and nothing is published") {
    temp_dir d;
    auto p = d / "cap.safetensors";
    writer_options o;
    o.max_header_size = 8192;
    o.reserve_bytes = 4000;
    writer w(p.string(), o);
    auto one = pattern(1, 3);
    for (int i = 0; i < 200; ++i) w.add("tensor_with_a_long_name_" + std::to_string(i), dtype::U8, {1}, one);
    try {
        w.finish();
        FAIL("finish() should have thrown");
    } catch (const error& e) {
        CHECK(e.code() == make_error_code(errc::HeaderTooLarge));
    }
    CHECK_FALSE(fs::exists(p));
    CHECK(dir_entries(d.path()).empty());
}

TEST_CASE("reservation overflow relocates the data once; strict mode refuses") {
    temp_dir d;
    std::vector<sample> samples;
    for (int i = 0; i < 300; ++i) {
        std::uint64_t n = 1000 + 37 * i;
        samples.push_back({"layer." + std::to_string(i) + ".weight", dtype::U8, {n}, pattern(n, 500 + i)});
    }
    for (std::string mode : {"insert_range", "copy_file_range", "strict"}) {
        auto p = d / (mode + ".safetensors");
        writer_options o;
        o.reserve_bytes = 100;  // far too small for 300 entries
        o.relocate_in_place = mode == "insert_range";
        o.strict_reservation = mode == "strict";
        writer w(p.string(), o);
        for (auto& s : samples) w.add(s.name, s.t, s.shape, s.data);
        if (mode == "strict") {
            try {
                w.finish();
                FAIL("strict finish() should have thrown");
            } catch (const error& e) {
                CHECK(e.code() == make_error_code(errc::ReservationExceeded));
            }
            CHECK_FALSE(fs::exists(p));
            continue;
        }
        w.finish();
        check_round_trip(p, samples, nullptr);
        // ext4 supports INSERT_RANGE; elsewhere the copy is the fallback.
        CHECK((w.stats().relocation == mode || w.stats().relocation == "copy_file_range"));
        CHECK(w.stats().header_reserved > 4088);
        if (w.stats().relocation == "copy_file_range") CHECK(w.stats().relocated_bytes == w.stats().data_bytes);
    }
    CHECK(dir_entries(d.path()).size() == 2);
}

TEST_CASE("abandon, destruction without finish and exceptions leave nothing behind") {
    temp_dir d;
    auto p = d / "gone.safetensors";
    auto data = pattern(1 << 20, 7);
    {
        writer w(p.string());
        w.add("a", dtype::U8, {data.size()}, data);
        w.abandon();
        w.abandon();  // idempotent
        CHECK_THROWS_AS(w.add("b", dtype::U8, {1}, std::span(data).first(1)), error);
    }
    { writer w(p.string()); w.add("a", dtype::U8, {data.size()}, data); }  // destroyed unfinished
    try {
        writer w(p.string());
        w.add("a", dtype::U8, {data.size()}, data);
        throw std::runtime_error("caller failed mid-save");
    } catch (const std::runtime_error&) {
    }
    CHECK_FALSE(fs::exists(p));
    CHECK(dir_entries(d.path()).empty());
}

TEST_CASE("finish replaces an existing file only at the end") {
    temp_dir d;
    auto p = d / "model.safetensors";
    write_file(p, std::string("old contents"));
    writer w(p.string());
    auto x = pattern(100, 1);
    w.add("x", dtype::U8, {100}, x);
    CHECK(read_file(p).size() == 12);  // still the old file
    w.finish();
    check_round_trip(p, {{"x", dtype::U8, {100}, x}}, nullptr);
    CHECK(dir_entries(d.path()).size() == 1);
}

namespace {

// The permission bits (and set-id/sticky bits) of `p`.
mode_t mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

// Writes one small tensor to `p` with the writer, O_DIRECT or buffered.
void write_small(const fs::path& p, bool direct) {
    writer_options o;
    o.direct = direct;
    writer w(p.string(), o);
    auto x = pattern(100, 1);
    w.add("x", dtype::U8, {100}, x);
    w.finish();
}

// Sets the process's umask for its lifetime.
struct umask_scope {
    mode_t old;
    explicit umask_scope(mode_t m) : old(::umask(m)) {}
    ~umask_scope() { ::umask(old); }
};

}  // namespace

TEST_CASE("a rewrite keeps the replaced file's permissions; a new file gets 0666 less the umask") {
    temp_dir d;
    auto p = d / "model.safetensors";
    for (bool direct : {true, false}) {
        INFO("direct " << direct);
        for (mode_t m : {0600, 0640, 0444, 0755}) {
            INFO("mode 0" << std::oct << m);
            write_file(p, std::string("old contents"));
            REQUIRE(::chmod(p.c_str(), m) == 0);
            write_small(p, direct);
            CHECK(mode_of(p) == m);
            CHECK(read_file(p).size() > 100);  // the new file, not the old one
        }
        for (mode_t mask : {027, 002, 077}) {
            INFO("umask 0" << std::oct << mask);
            fs::remove(p);
            {
                umask_scope u(mask);
                write_small(p, direct);
            }
            CHECK(mode_of(p) == (0666 & ~mask));
        }
    }
    CHECK(dir_entries(d.path()).size() == 1);
}

TEST_CASE("a file that appears at the target while the writer runs lends the result its permissions") {
    temp_dir d;
    auto p = d / "model.safetensors";
    writer w(p.string());
    auto x = pattern(100, 1);
    w.add("x", dtype::U8, {100}, x);
    write_file(p, std::string("someone else's"));
    REQUIRE(::chmod(p.c_str(), 0600) == 0);
    w.finish();
    CHECK(mode_of(p) == 0600);
    check_round_trip(p, {{"x", dtype::U8, {100}, x}}, nullptr);
}

TEST_CASE("append adds tensors after the data and rewrites the header in place") {
    temp_dir d;
    auto p = d / "grow.safetensors";
    std::vector<sample> samples{{"a", dtype::F32, {4}, pattern(16, 1)}, {"b", dtype::U8, {3}, pattern(3, 2)}};
    metadata_map meta{{"step", "1"}};
    {
        writer_options o;
        o.expected_tensors = 8;
        writer w(p.string(), o);
        for (auto& s : samples) w.add(s.name, s.t, s.shape, s.data);
        w.finish(meta);
    }
    auto before = read_file(p);
    written_file f0(p);
    {
        auto w = writer::open_append(p.string());
        samples.push_back({"c", dtype::BF16, {2, 3}, pattern(12, 3)});
        samples.push_back({"d", dtype::U8, {0}, {}});
        w.add("c", dtype::BF16, {2, 3}, samples[2].data);
        w.add("d", dtype::U8, {0}, {});
        CHECK_THROWS_AS(w.add("a", dtype::U8, {1}, std::span(samples[1].data).first(1)), error);  // duplicate of an old name
        w.finish();
        CHECK(w.stats().tensors == 2);
    }
    check_round_trip(p, samples, &meta);
    auto after = read_file(p);
    // Old data untouched, header size unchanged, new bytes at the old end.
    REQUIRE(after.size() == before.size() + 12);
    CHECK(std::equal(before.begin() + static_cast<long>(f0.hdr.data_start()), before.end(),
                     after.begin() + static_cast<long>(f0.hdr.data_start())));
    CHECK(written_file(p).hdr.header_size == f0.hdr.header_size);
    {  // replacing metadata in append mode
        auto w = writer::open_append(p.string());
        metadata_map m2{{"step", "2"}, {"note", "appended"}};
        w.finish(m2);
        check_round_trip(p, samples, &m2);
    }
}

TEST_CASE("append beyond the reservation is refused and leaves the file as it was") {
    temp_dir d;
    auto p = d / "full.safetensors";
    {
        writer_options o;
        o.reserve_bytes = 100;  // rounded up to 4088
        writer w(p.string(), o);
        w.add("a", dtype::U8, {1}, pattern(1, 1));
        w.finish();
    }
    auto before = read_file(p);
    auto w = writer::open_append(p.string());
    auto one = pattern(1, 2);
    bool refused = false;
    for (int i = 0; i < 100 && !refused; ++i) {
        try {
            w.add(std::string(60, 'n') + std::to_string(i), dtype::U8, {1}, one);
        } catch (const error& e) {
            CHECK(e.code() == make_error_code(errc::ReservationExceeded));
            refused = true;
        }
    }
    CHECK(refused);
    w.abandon();
    CHECK(read_file(p) == before);
}

TEST_CASE("writer_stats::file_size is the published file's size in every mode") {
    temp_dir d;
    auto big = pattern((1u << 20) + 4097, 71), small = pattern(333, 72);
    auto p = d / "f.safetensors";
    struct mode {
        std::string name;
        bool direct;
        std::uint64_t reserve;  // 64: too small, the data is relocated
        bool in_place;
    };
    for (auto m : {mode{"direct", true, 0, true}, mode{"buffered", false, 0, true},
                   mode{"relocated in place", true, 64, true}, mode{"relocated by copy", true, 64, false}}) {
        INFO(m.name);
        writer_options o;
        o.direct = m.direct;
        o.reserve_bytes = m.reserve;
        o.relocate_in_place = m.in_place;
        o.sync = o.sync_dir = false;
        writer w(p.string(), o);
        w.add("big", dtype::U8, {big.size()}, big);
        w.add("small", dtype::U8, {small.size()}, small);
        CHECK(w.stats().file_size == 0);  // nothing published yet
        w.finish(metadata_map{{"k", std::string(300, 'v')}});
        CHECK(w.stats().file_size == fs::file_size(p));
        CHECK(w.stats().file_size == 8 + w.stats().header_reserved + big.size() + small.size());
    }
    // Append: the size after the new data.
    auto w = writer::open_append(p.string());
    w.add("more", dtype::U8, {small.size()}, small);
    w.finish();
    CHECK(w.stats().file_size == fs::file_size(p));
    CHECK(written_file(p).tensor("more") == small);
}
