// Tests for include/ringsafe/gguf_writer.hpp: the streaming writer (reserve,
// padding entry, backfill, one relocation), the declared writer (the exact
// header, writes in any order from threads), the checks made before any byte,
// publishing, and kill -9 of a child mid-write or mid-conversion (`ringsafe cp`). Every file written is read back by ringsafe's reader and by
// gguf::parse with metadata and tensors equal; with RINGSAFE_GGUF_KEEP=DIR
// each is also copied to DIR with a manifest of what was written, which
// tests/python/test_gguf_written.py reads back with gguf-py.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "gguf_files.hpp"
#include "ringsafe/gguf_writer.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;
using gguf::metadata_entry;
using gguf::tensor_record;
using gguf::value_type;

namespace {

struct model {
    std::vector<metadata_entry> metadata;
    std::vector<tensor_record> tensors;
    std::vector<std::vector<std::byte>> data;
};

std::string hex(std::string_view s) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned char c : s) out += digits[c >> 4], out += digits[c & 15];
    return out;
}

// Copies `file` to $RINGSAFE_GGUF_KEEP with a manifest of `m` (hex keys,
// names and value bytes; tensor sha256s), for the gguf-py read-back.
void keep(const fs::path& file, const model& m) {
    const char* dir = std::getenv("RINGSAFE_GGUF_KEEP");
    if (!dir) return;
    static std::atomic<int> n{0};
    const std::string stem = (fs::path(dir) / ("w" + std::to_string(getpid()) + "_" + std::to_string(n++))).string();
    fs::copy_file(file, stem + ".gguf", fs::copy_options::overwrite_existing);
    std::ofstream j(stem + ".json");
    j << "{\"metadata\": [";
    for (std::size_t i = 0; i < m.metadata.size(); ++i) {
        const auto& e = m.metadata[i];
        j << (i ? ", " : "") << "{\"key\": \"" << hex(e.key) << "\", \"type\": " << static_cast<int>(e.type)
          << ", \"element_type\": " << static_cast<int>(e.element_type) << ", \"count\": " << e.count
          << ", \"data\": \"" << hex(e.data) << "\", \"offsets\": [";
        for (std::size_t k = 0; k < e.offsets.size(); ++k) j << (k ? ", " : "") << e.offsets[k];
        j << "]}";
    }
    j << "], \"tensors\": [";
    for (std::size_t i = 0; i < m.tensors.size(); ++i) {
        const auto& t = m.tensors[i];
        j << (i ? ", " : "") << "{\"name\": \"" << hex(t.name) << "\", \"type\": " << static_cast<int>(t.type)
          << ", \"ne\": [";
        for (std::size_t k = 0; k < t.ne.size(); ++k) j << (k ? ", " : "") << t.ne[k];
        j << "], \"sha256\": \"" << sha256_hex(m.data[i]) << "\"}";
    }
    j << "]}\n";
}

bool same_entry(const metadata_entry& a, const metadata_entry& b) {
    return a.key == b.key && a.type == b.type && a.element_type == b.element_type && a.count == b.count &&
           a.data == b.data && (a.element_type != value_type::STRING || a.offsets == b.offsets);
}

// Reads `file` back with gguf::parse and ringsafe's reader: the metadata (the
// padding entry aside) and every tensor's record and bytes equal `m`'s.
// Returns the parsed header.
gguf::header check_file(const fs::path& file, const model& m) {
    const auto bytes = read_file(file);
    gguf::header h = gguf::parse(bytes);
    std::vector<metadata_entry> md;
    for (const auto& e : h.metadata)
        if (e.key != gguf::padding_key) md.push_back(e);
    REQUIRE(md.size() == m.metadata.size());
    for (std::size_t i = 0; i < md.size(); ++i) CHECK(same_entry(md[i], m.metadata[i]));
    REQUIRE(h.tensors.size() == m.tensors.size());
    CHECK(h.data_offset + h.data_size == bytes.size());
    auto r = reader::open(file.string());
    auto got = read_tensors(r);
    for (std::size_t i = 0; i < m.tensors.size(); ++i) {
        const auto* t = h.find(m.tensors[i].name);
        REQUIRE(t);
        CHECK(t->ggml == m.tensors[i].type);
        CHECK(gguf::ne_of(*t) == m.tensors[i].ne);
        CHECK(got.at(m.tensors[i].name) == m.data[i]);
    }
    keep(file, m);
    return h;
}

// Tensors of every plain type, raw blocks of Q8_0 and Q4_K, a scalar, an empty one.
model sample_model() {
    model m;
    auto add_md = [&](metadata_entry e) { m.metadata.push_back(std::move(e)); };
    add_md(metadata_entry::make("general.architecture", value_type::STRING, std::string_view("llama")));
    add_md(metadata_entry::make("general.name", value_type::STRING, std::string_view("größe 🙂")));
    add_md(metadata_entry::make("u8", value_type::UINT8, std::uint64_t{200}));
    add_md(metadata_entry::make("i8", value_type::INT8, std::int64_t{-100}));
    add_md(metadata_entry::make("u16", value_type::UINT16, std::uint64_t{65000}));
    add_md(metadata_entry::make("i16", value_type::INT16, std::int64_t{-30000}));
    add_md(metadata_entry::make("u32", value_type::UINT32, std::uint64_t{4000000000u}));
    add_md(metadata_entry::make("i32", value_type::INT32, std::int64_t{-2000000000}));
    add_md(metadata_entry::make("f32", value_type::FLOAT32, 0.25));
    add_md(metadata_entry::make("b", value_type::BOOL, true));
    add_md(metadata_entry::make("u64", value_type::UINT64, std::uint64_t{1} << 63));
    add_md(metadata_entry::make("i64", value_type::INT64, std::int64_t{-(std::int64_t{1} << 62)}));
    add_md(metadata_entry::make("f64", value_type::FLOAT64, -1.5e300));
    const std::vector<gguf::scalar> ints{std::int64_t{1}, std::int64_t{-2}, std::int64_t{3}};
    add_md(metadata_entry::make_array("arr.i32", value_type::INT32, ints));
    const std::vector<gguf::scalar> strs{std::string_view("a"), std::string_view(""), std::string_view("Ġthe")};
    add_md(metadata_entry::make_array("arr.str", value_type::STRING, strs));
    add_md(metadata_entry::make_array("arr.empty", value_type::FLOAT32, {}));
    const std::vector<std::pair<const char*, ggml_type>> plain{
        {"f32", ggml_type::F32}, {"f16", ggml_type::F16}, {"bf16", ggml_type::BF16}, {"f64", ggml_type::F64},
        {"i8", ggml_type::I8},   {"i16", ggml_type::I16}, {"i32", ggml_type::I32},   {"i64", ggml_type::I64}};
    for (auto& [n, t] : plain) m.tensors.push_back({std::string("t.") + n, t, {5, 3}});
    m.tensors.push_back({"blk.0.q8", ggml_type::Q8_0, {64, 2}});
    m.tensors.push_back({"blk.0.q4k", ggml_type::Q4_K, {256, 3}});
    m.tensors.push_back({"scalar", ggml_type::F32, {}});
    m.tensors.push_back({"empty", ggml_type::F16, {0, 4}});
    m.tensors.push_back({"four.dims", ggml_type::I8, {2, 3, 1, 2}});
    for (std::size_t i = 0; i < m.tensors.size(); ++i)
        m.data.push_back(gguf_tensor_bytes(gguf::tensor_bytes(m.tensors[i]), 7, i));
    return m;
}

void write_streamed(const fs::path& p, const model& m, const gguf::writer_options& o, ringsafe::writer_stats* st = nullptr) {
    gguf::writer w(p.string(), m.metadata, o);
    for (std::size_t i = 0; i < m.tensors.size(); ++i) w.add(m.tensors[i], m.data[i]);
    w.finish();
    if (st) *st = w.stats();
}

}  // namespace

TEST_CASE("gguf writer: a streamed file reads back equal, its header backfilled into the reservation") {
    temp_dir d;
    model m = sample_model();
    for (std::uint32_t alignment : {32u, 64u, 8192u}) {
        for (bool direct : {true, false}) {
            CAPTURE(alignment, direct);
            gguf::writer_options o;
            o.alignment = alignment;
            o.direct = direct;
            o.block_size = 4096;  // several blocks in flight even for small tensors
            const fs::path p = d / ("s" + std::to_string(alignment) + (direct ? "d" : "b") + ".gguf");
            ringsafe::writer_stats st;
            model expect = m;
            if (alignment != 32)
                expect.metadata.push_back(
                    metadata_entry::make("general.alignment", value_type::UINT32, std::uint64_t{alignment}));
            write_streamed(p, m, o, &st);
            auto h = check_file(p, expect);
            CHECK(h.alignment == alignment);
            CHECK(st.relocation.empty());
            CHECK(h.data_offset == st.header_reserved);
            CHECK(h.data_offset % std::max<std::uint32_t>(4096, alignment) == 0);
            CHECK(st.file_size == fs::file_size(p));
            CHECK(st.tensors == m.tensors.size());
            // The slack is the padding entry, the last one, of spaces.
            REQUIRE(h.metadata.back().key == gguf::padding_key);
            auto pad = h.metadata.back().as_string();
            REQUIRE(pad);
            CHECK(pad->find_first_not_of(' ') == std::string_view::npos);
            CHECK(st.header_json + pad->size() == h.data_offset);
        }
    }
}

TEST_CASE("gguf writer: a header larger than the reservation relocates the data once") {
    temp_dir d;
    model m = sample_model();
    // A vocabulary far larger than the 4096 bytes reserved, given only at finish().
    auto big = llama_metadata(3000, 2000);
    model expect = m;
    expect.metadata = big;
    for (bool in_place : {true, false}) {
        CAPTURE(in_place);
        gguf::writer_options o;
        o.reserve_bytes = 4096;
        o.relocate_in_place = in_place;
        const fs::path p = d / (in_place ? "r1.gguf" : "r2.gguf");
        gguf::writer w(p.string(), m.metadata, o);
        for (std::size_t i = 0; i < m.tensors.size(); ++i) w.add(m.tensors[i], m.data[i]);
        w.finish(&big);
        const auto& st = w.stats();
        CHECK_FALSE(st.relocation.empty());
        if (!in_place) CHECK(st.relocation == "copy_file_range");
        CHECK(st.header_reserved > 4096);
        auto h = check_file(p, expect);
        CHECK(h.data_offset == st.header_reserved);
    }
    SECTION("strict_reservation refuses instead, leaving nothing at the target") {
        gguf::writer_options o;
        o.reserve_bytes = 4096;
        o.strict_reservation = true;
        const fs::path p = d / "strict.gguf";
        gguf::writer w(p.string(), {}, o);
        w.add(m.tensors[0], m.data[0]);
        CHECK(expect_error([&] { w.finish(&big); }).code() == errc::ReservationExceeded);
        CHECK_FALSE(fs::exists(p));
        CHECK(fs::is_empty(d.path()) == false);  // the earlier files stay
    }
}

TEST_CASE("gguf writer: chunked tensors, no tensors, and the writer's states") {
    temp_dir d;
    model m = sample_model();
    SECTION("begin/append/end in pieces of any size") {
        const fs::path p = d / "chunks.gguf";
        gguf::writer w(p.string(), m.metadata);
        for (std::size_t i = 0; i < m.tensors.size(); ++i) {
            w.begin(m.tensors[i]);
            std::span<const std::byte> b(m.data[i]);
            for (std::size_t k = 0; k < b.size(); k += 7) w.append(b.subspan(k, std::min<std::size_t>(7, b.size() - k)));
            w.end();
        }
        w.finish();
        check_file(p, m);
    }
    SECTION("metadata only") {
        const fs::path p = d / "empty.gguf";
        model e;
        e.metadata = m.metadata;
        write_streamed(p, e, {});
        check_file(p, e);
    }
    SECTION("incomplete tensors and misuse are WriterState, the file is not published") {
        const fs::path p = d / "state.gguf";
        gguf::writer w(p.string());
        w.begin(m.tensors[0]);
        w.append(std::span(m.data[0]).first(4));
        CHECK(expect_error([&] { w.end(); }).code() == errc::WriterState);
        CHECK(expect_error([&] { w.finish(); }).code() == errc::WriterState);
        CHECK(expect_error([&] { w.add(m.tensors[1], m.data[1]); }).code() == errc::WriterState);
        w.abandon();
        CHECK_FALSE(fs::exists(p));
        CHECK(fs::is_empty(d.path()));
    }
}

TEST_CASE("gguf writer: what GGUF cannot hold is refused before any byte, naming it") {
    temp_dir d;
    const fs::path p = d / "bad.gguf";
    const std::vector<std::byte> four(4);
    gguf::writer w(p.string());
    auto refused = [&](const tensor_record& t, std::span<const std::byte> b) {
        return expect_error([&] { w.add(t, b); });
    };
    auto e = refused({std::string(64, 'n'), ggml_type::F32, {1}}, four);
    CHECK(e.code() == errc::BadTensorInfo);
    CHECK_THAT(e.message(), Catch::Contains("nnnn"));
    CHECK(refused({"five", ggml_type::F32, {1, 1, 1, 1, 1}}, four).code() == errc::BadTensorInfo);
    CHECK(refused({"rows", ggml_type::Q8_0, {31}}, four).code() == errc::BadTensorInfo);
    e = refused({"size", ggml_type::F32, {2}}, four);
    CHECK(e.code() == errc::InvalidArgument);
    CHECK_THAT(e.message(), Catch::Contains("'size'"));
    w.add({"ok", ggml_type::F32, {1}}, four);  // the writer stays usable
    CHECK(refused({"ok", ggml_type::F32, {1}}, four).code() == errc::DuplicateTensor);
    CHECK(expect_error([&] {
              gguf::writer_options o;
              o.alignment = 48;
              gguf::writer x((d / "x.gguf").string(), {}, o);
          }).code() == errc::InvalidArgument);
    std::vector<metadata_entry> dup{metadata_entry::make("k", value_type::UINT8, std::uint64_t{1}),
                                    metadata_entry::make("k", value_type::UINT8, std::uint64_t{2})};
    CHECK(expect_error([&] { gguf::writer x((d / "y.gguf").string(), dup); }).code() == errc::DuplicateKey);
    w.abandon();
    CHECK(fs::is_empty(d.path()));
}

TEST_CASE("gguf writer: a failed write keeps the file already at the target") {
    temp_dir d;
    const fs::path p = d / "keep.gguf";
    write_file(p, std::string("old bytes"));
    model m = sample_model();
    {
        gguf::writer w(p.string(), m.metadata);
        w.add(m.tensors[0], m.data[0]);
    }  // destroyed without finish()
    {
        gguf::declared_writer w(p.string(), m.metadata, m.tensors);
        w.write(0, 0, m.data[0]);
        CHECK(expect_error([&] { w.finish(); }).code() == errc::WriterState);
    }
    auto bytes = read_file(p);
    CHECK(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()) == "old bytes");
    CHECK(std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()) == 1);
}

TEST_CASE("gguf declared writer: the exact header, bytes in any order from several threads") {
    temp_dir d;
    model m = sample_model();
    for (std::uint32_t alignment : {32u, 128u}) {
        CAPTURE(alignment);
        model expect = m;
        if (alignment != 32)
            expect.metadata.push_back(
                metadata_entry::make("general.alignment", value_type::UINT32, std::uint64_t{alignment}));
        gguf::writer_options o;
        o.alignment = alignment;
        const fs::path p = d / ("decl" + std::to_string(alignment) + ".gguf");
        gguf::declared_writer w(p.string(), m.metadata, m.tensors, o);
        CHECK(w.data_offset() == gguf::serialized_size(expect.metadata, m.tensors, alignment));
        // Each tensor in two halves, the tensors in reverse order, spread over threads.
        std::vector<std::thread> threads;
        for (std::size_t i = m.tensors.size(); i-- > 0;) {
            threads.emplace_back([&, i] {
                std::span<const std::byte> b(m.data[i]);
                const std::size_t half = b.size() / 2;
                w.write(i, half, b.subspan(half));
                w.write(w.index(m.tensors[i].name), 0, b.first(half));
            });
        }
        for (auto& t : threads) t.join();
        w.finish();
        check_file(p, expect);
        // Byte for byte the file the test support makes from the serializer's header.
        std::vector<metadata_entry> md = expect.metadata;
        auto whole = make_gguf(md, m.tensors, 7, alignment);
        CHECK(read_file(p) == whole);
    }
}

TEST_CASE("gguf declared writer: ranges past a tensor are refused; duplicates before any byte") {
    temp_dir d;
    model m = sample_model();
    const fs::path p = d / "r.gguf";
    {
        gguf::declared_writer w(p.string(), m.metadata, m.tensors);
        CHECK(expect_error([&] { w.write(0, 1, m.data[0]); }).code() == errc::InvalidArgument);
        CHECK(expect_error([&] { w.index("nope"); }).code() == errc::TensorNotFound);
    }
    auto dup = m.tensors;
    dup.push_back(dup[0]);
    CHECK(expect_error([&] { gguf::declared_writer w(p.string(), m.metadata, dup); }).code() ==
          errc::DuplicateTensor);
    CHECK(fs::is_empty(d.path()));
}

namespace {

// The target after a kill: the old file's bytes, or the whole new file (read back equal).
void check_old_or_new(const fs::path& p, const std::vector<std::byte>& old, const model& m, int& olds, int& news) {
    auto bytes = read_file(p);
    if (bytes == old) {
        ++olds;
        return;
    }
    check_file(p, m);
    ++news;
}

model crash_model() {
    model m;
    m.metadata.push_back(metadata_entry::make("general.name", value_type::STRING, std::string_view("crash")));
    for (std::size_t i = 0; i < 48; ++i) {
        m.tensors.push_back({"blk." + std::to_string(i), ggml_type::F32, {16384}});
        m.data.push_back(gguf_tensor_bytes(16384 * 4, 11, i));
    }
    return m;
}

}  // namespace

TEST_CASE("gguf writer: kill -9 at any point of a write leaves the old file or the new one") {
    temp_dir d;
    const fs::path p = d / "target.gguf";
    model old_model;
    old_model.tensors.push_back({"old", ggml_type::F32, {4}});
    const auto old = make_gguf({}, old_model.tensors, 1);
    const model m = crash_model();
    int olds = 0, news = 0;
    for (int k = 0; k <= 12; ++k) {
        write_file(p, old);
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::close(ready[0]);
            gguf::writer w(p.string(), m.metadata);
            for (std::size_t i = 0; i < m.tensors.size(); ++i) {
                w.add(m.tensors[i], m.data[i]);
                if (::write(ready[1], "t", 1) != 1) ::_exit(3);
            }
            w.finish();
            if (::write(ready[1], "f", 1) != 1) ::_exit(3);
            for (;;) ::pause();
        }
        ::close(ready[1]);
        // Kill after 4k tensors (k = 12: after finish()), a little later each time.
        const std::size_t wait_for = k == 12 ? m.tensors.size() + 1 : static_cast<std::size_t>(4 * k);
        char c;
        for (std::size_t got = 0; got < wait_for && ::read(ready[0], &c, 1) == 1;) ++got;
        ::usleep(static_cast<useconds_t>(k * 700));
        ::kill(pid, SIGKILL);
        int st = 0;
        ::waitpid(pid, &st, 0);
        ::close(ready[0]);
        CHECK(WIFSIGNALED(st));
        check_old_or_new(p, old, m, olds, news);
    }
    CHECK(olds > 0);
    CHECK(news > 0);  // the last kill comes after finish()
}

TEST_CASE("cp to GGUF: kill -9 at any point of a conversion leaves the old file or the new one") {
    temp_dir d;
    const fs::path src = d / "src.safetensors", p = d / "target.gguf";
    const model m = crash_model();
    {
        writer w(src.string());
        for (std::size_t i = 0; i < m.tensors.size(); ++i) w.add(m.tensors[i].name, dtype::F32, {16384}, m.data[i]);
        w.finish(metadata_map{{"general.name", "crash"}});
    }
    model expect = m;
    const std::vector<std::byte> old = make_gguf({}, {{"old", ggml_type::F32, {4}}}, 1);
    const std::string cli = cli_path();  // before fork(): a child only execs or exits
    int olds = 0, news = 0;
    for (int k = 0; k <= 10; ++k) {
        write_file(p, old);
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::execl(cli.c_str(), cli.c_str(), "cp", src.c_str(), p.c_str(), "--buffer", "1M", "--buffers", "2",
                    static_cast<char*>(nullptr));
            ::_exit(127);
        }
        ::usleep(static_cast<useconds_t>(k * k * 600));  // from before the start to after the end
        ::kill(pid, SIGKILL);
        int st = 0;
        ::waitpid(pid, &st, 0);
        check_old_or_new(p, old, expect, olds, news);
    }
    CHECK(olds > 0);
    INFO("kills that came after the copy: " << news);
}

TEST_CASE("gguf writer: the guide's example (include/ringsafe/README.md, Writing GGUF)") {
    temp_dir d;
    const auto cwd = fs::current_path();
    fs::current_path(d.path());
    const auto q8_blocks = gguf_tensor_bytes(8 * 34, 3, 0);  // 256 elements: 8 Q8_0 blocks
    const auto norm_bytes = gguf_tensor_bytes(64 * 4, 3, 1);
    {
        namespace gguf = ringsafe::gguf;
        using ringsafe::ggml_type;
        std::vector<gguf::metadata_entry> md{
            gguf::metadata_entry::make("general.architecture", gguf::value_type::STRING, std::string_view("llama")),
            gguf::metadata_entry::make("llama.context_length", gguf::value_type::UINT32, std::uint64_t{4096})};
        gguf::writer w("model.gguf", md);                     // streaming: a temporary beside the target
        w.add({"token_embd.weight", ggml_type::Q8_0, {64, 4}}, q8_blocks);  // ne in ggml's order; raw blocks pass through
        w.add({"output_norm.weight", ggml_type::F32, {64}}, norm_bytes);
        w.finish();                                           // the header backfilled, fsync, rename
    }
    model m;
    m.metadata = {metadata_entry::make("general.architecture", value_type::STRING, std::string_view("llama")),
                  metadata_entry::make("llama.context_length", value_type::UINT32, std::uint64_t{4096})};
    m.tensors = {{"token_embd.weight", ggml_type::Q8_0, {64, 4}}, {"output_norm.weight", ggml_type::F32, {64}}};
    m.data = {q8_blocks, norm_bytes};
    check_file(d / "model.gguf", m);
    fs::current_path(cwd);
}
