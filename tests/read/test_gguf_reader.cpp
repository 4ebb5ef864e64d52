// The reader over GGUF files: every conformance case (records and the sha256
// of every tensor's bytes, ggml's error kinds), selections, rows of plain
// tensors and the refusal of rows of block types, the split corpus and split
// sets made here (opened from any part, every check of llama.cpp's loader),
// the format told by the magic bytes, and headers larger than the first read.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>

#include "gguf_cases.hpp"
#include "gguf_files.hpp"
#include "ringsafe/reader.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

std::string open_kind(const std::string& spec, const reader_options& o = {}) {
    try {
        reader::open(spec, o);
    } catch (const error& e) {
        return std::string(e.kind()) + ": " + e.message();
    }
    return "accepted";
}

// Every tensor's sha256 by name, read through one packed read.
std::map<std::string, std::string> hashes(reader& r) {
    std::map<std::string, std::string> out;
    for (auto& [name, bytes] : read_tensors(r)) out[name] = sha256_hex(bytes);
    return out;
}

const fs::path valid_dir() { return gguf_conformance_dir() / "valid"; }

// A split set of `n` parts under `dir`, with `per_part` F32 tensors each;
// `edit(part, metadata, records)` may change a part before it is written.
std::vector<fs::path> write_split(const fs::path& dir, const std::string& stem, std::size_t n, std::size_t per_part,
                                  const std::function<void(std::size_t, std::vector<gguf::metadata_entry>&,
                                                           std::vector<gguf::tensor_record>&)>& edit = {}) {
    std::vector<fs::path> paths;
    for (std::size_t p = 0; p < n; ++p) {
        auto meta = split_keys(p, n, n * per_part);
        if (p == 0) meta.insert(meta.begin(), gguf::metadata_entry::make("general.architecture", gguf::value_type::STRING, std::string_view("llama")));
        std::vector<gguf::tensor_record> recs;
        for (std::size_t i = 0; i < per_part; ++i)
            recs.push_back({"blk." + std::to_string(p) + ".w" + std::to_string(i), ggml_type::F32, {4, 2}});
        if (edit) edit(p, meta, recs);
        paths.push_back(dir / split_name(stem, p + 1, n));
        write_file(paths.back(), make_gguf(meta, recs, 100 * p));
    }
    return paths;
}

}  // namespace

TEST_CASE("reader: every valid GGUF conformance file, its records and the sha256 of every tensor") {
    reader_options alone;
    alone.gguf_split_set = false;
    for (const gguf_case& c : load_gguf_cases(valid_dir())) {
        INFO(c.file);
        reader r = reader::open(c.path.string(), alone);
        CHECK(r.format() == file_format::gguf);
        REQUIRE(r.gguf() != nullptr);
        CHECK(r.gguf()->version == c.version);
        CHECK(r.gguf()->alignment == c.alignment);
        CHECK(r.gguf()->data_offset == c.data_offset);
        CHECK(r.gguf()->metadata.size() == c.metadata.size());
        CHECK(r.gguf()->tensors.empty());  // moved into the reader's table
        CHECK_FALSE(r.metadata().has_value());
        REQUIRE(r.shards().size() == 1);
        CHECK(r.shards()[0].format == file_format::gguf);
        CHECK(r.shards()[0].data_start == c.data_offset);
        REQUIRE(r.tensors().size() == c.tensors.size());
        const auto got = hashes(r);
        for (std::size_t i = 0; i < c.tensors.size(); ++i) {
            const tensor_info& t = r.tensors()[i];
            INFO(c.tensors[i].name);
            CHECK(t.name == c.tensors[i].name);
            CHECK(ggml_type_name(t.ggml) == c.tensors[i].type);
            CHECK(t.shape == c.tensors[i].shape);
            CHECK(t.begin == c.tensors[i].offset);
            CHECK(t.size() == c.tensors[i].nbytes);
            CHECK(got.at(t.name) == c.tensors[i].sha256);
            CHECK(r.find(t.name) == &t);
        }
    }
}

TEST_CASE("reader: every invalid GGUF conformance file fails with ggml's error kind, naming the file") {
    for (const gguf_case& c : load_gguf_cases(gguf_conformance_dir() / "invalid")) {
        INFO(c.file);
        const std::string got = open_kind(c.path.string());
        CHECK(got.rfind(c.error_kind + ": ", 0) == 0);
        CHECK(got.find(c.file) != std::string::npos);
    }
}

TEST_CASE("reader: a GGUF file is told by its magic, whatever its name") {
    temp_dir t;
    fs::copy_file(valid_dir() / "meta_llama.gguf", t / "model.safetensors");
    reader r = reader::open((t / "model.safetensors").string());
    CHECK(r.format() == file_format::gguf);
    CHECK(r.tensors().size() == gguf::parse(read_file(valid_dir() / "meta_llama.gguf")).tensors.size());
    // A safetensors file named .gguf stays safetensors; a file that starts as
    // neither gets GGUF's verdict when named so, safetensors' otherwise.
    write_u8_file(t / "w.gguf", std::vector<std::byte>(4));
    CHECK(reader::open((t / "w.gguf").string()).format() == file_format::safetensors);
    write_file(t / "junk.gguf", std::string("lmgg\3\0\0\0 and more bytes", 22));
    write_file(t / "junk.bin", std::string("lmgg\3\0\0\0 and more bytes", 22));
    CHECK_THAT(open_kind((t / "junk.gguf").string()), Catch::StartsWith("BadMagic: "));
    CHECK_THAT(open_kind((t / "junk.bin").string()), Catch::StartsWith("HeaderTooLarge: "));
}

TEST_CASE("reader: selections, rows of plain tensors, raw blocks of quantized ones") {
    reader r = reader::open((valid_dir() / "shape_many.gguf").string());
    const gguf_case c = [] {
        for (auto& x : load_gguf_cases(valid_dir()))
            if (x.file == "shape_many.gguf") return x;
        throw std::logic_error("no shape_many.gguf");
    }();
    std::map<std::string, std::string> want;
    for (auto& t : c.tensors) want[t.name] = t.sha256;

    const selection q = r.select_if([](const tensor_info& t) { return t.quantized(); });
    REQUIRE_FALSE(q.empty());
    std::vector<std::byte> arena(r.packed_size(q));
    const auto placed = r.read_packed(q, arena);
    for (std::size_t k = 0; k < q.size(); ++k) {
        const tensor_info& t = r.tensors()[q.indices()[k]];
        CHECK(sha256_hex(std::span(arena).subspan(placed[k].offset, placed[k].size)) == want.at(t.name));
    }
    const selection g = r.select_glob("blk.1?.w");
    CHECK(g.size() == 10);
    const selection named = r.select({"blk.3.w", "blk.0.w"});
    CHECK(r.tensors()[named.indices()[0]].name == "blk.3.w");

    // Rows of a plain tensor: I32 [3,2,1] in shape order, rows of 2 x 1 x 4 bytes.
    const tensor_info& plain = r.at("blk.3.w");
    REQUIRE(plain.ggml == ggml_type::I32);
    std::vector<std::byte> whole(plain.size()), rows(plain.size() / 3 * 2);
    r.read(r.select({"blk.3.w"}), std::vector<std::span<std::byte>>{whole});
    r.read_rows("blk.3.w", 1, 3, rows);
    CHECK(std::equal(rows.begin(), rows.end(), whole.begin() + static_cast<std::ptrdiff_t>(plain.size() / 3)));

    // Rows, boxes and box sizes of a block type are refused, naming it and its type.
    const tensor_info& quant = r.tensors()[q.indices()[0]];
    std::vector<std::byte> out(quant.size());
    const error e = expect_error([&] { r.read_rows(quant.name, 0, 1, out); });
    CHECK(e.code() == errc::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains(quant.name) && Catch::Contains(std::string(ggml_type_name(quant.ggml))));
    const std::vector<dim_range> box{{0, 1}, {0, 32}};
    CHECK(expect_error([&] { r.read_box(quant.name, box, out); }).code() == errc::InvalidArgument);
    CHECK(expect_error([&] { r.box_bytes(quant.name, box); }).code() == errc::InvalidArgument);
    // A byte window of its blocks is fine (verify reads that way).
    read_request w{quant.name, {}, std::span(out).first(10), dim_range{2, 12}};
    r.execute(r.plan(std::span(&w, 1)));
    CHECK(std::equal(out.begin(), out.begin() + 10, arena.begin() + static_cast<std::ptrdiff_t>(placed[0].offset) + 2));
}

TEST_CASE("reader: the split corpus opens as one model from any of its parts") {
    std::map<std::string, const gguf_case*> parts;
    const auto cases = load_gguf_cases(valid_dir());
    for (auto& c : cases)
        if (c.split) parts[c.file] = &c;
    REQUIRE(parts.size() == 3);
    for (const auto& [file, opened] : parts) {
        INFO("opened " << file);
        reader r = reader::open((valid_dir() / file).string());
        CHECK(r.sharded());
        REQUIRE(r.shards().size() == 3);
        CHECK(r.tensors().size() == 6);
        CHECK(r.gguf()->find_key("general.architecture"));  // the first part's metadata
        CHECK(r.shards()[opened->split->no].spec == (valid_dir() / file).string());
        const auto got = hashes(r);
        std::size_t i = 0;
        for (const auto& [name, c] : parts) {
            const shard_info& sh = r.shards()[c->split->no];
            CHECK(fs::path(sh.spec).filename() == name);
            CHECK(sh.data_start == c->data_offset);
            CHECK(sh.gguf->split()->no == c->split->no);
            for (const auto& t : c->tensors) {
                INFO(t.name);
                CHECK(r.shard_of(*r.index_of(t.name)) == c->split->no);
                CHECK(r.at(t.name).begin == t.offset);
                CHECK(got.at(t.name) == t.sha256);
                ++i;
            }
        }
        CHECK(i == 6);
    }
    // One part alone when asked.
    reader_options alone;
    alone.gguf_split_set = false;
    reader one = reader::open((valid_dir() / "split_model-00002-of-00003.gguf").string(), alone);
    CHECK(one.tensors().size() == 2);
    CHECK_FALSE(one.sharded());
}

TEST_CASE("reader: split sets made here, and each check of llama.cpp's loader") {
    temp_dir t;
    SECTION("a set of four opens from its last part") {
        const auto paths = write_split(t.path(), "m", 4, 3);
        reader r = reader::open(paths[3].string());
        CHECK(r.shards().size() == 4);
        CHECK(r.tensors().size() == 12);
        const auto all = read_tensors(r);
        for (std::size_t p = 0; p < 4; ++p)
            for (std::size_t i = 0; i < 3; ++i)
                CHECK(all.at("blk." + std::to_string(p) + ".w" + std::to_string(i)) == gguf_tensor_bytes(32, 100 * p, i));
    }
    SECTION("a missing part is the error of opening it, naming it") {
        const auto paths = write_split(t.path(), "m", 3, 1);
        fs::remove(paths[1]);
        const std::string got = open_kind(paths[0].string());
        CHECK_THAT(got, Catch::StartsWith("IoError: ") && Catch::Contains("m-00002-of-00003.gguf") &&
                            Catch::Contains("part 2 of 3"));
    }
    SECTION("a foreign part: another set's count, another index, no split keys, not GGUF") {
        auto paths = write_split(t.path(), "m", 3, 1, [](std::size_t p, auto& meta, auto&) {
            if (p == 2) meta = split_keys(2, 4, 3);
        });
        CHECK_THAT(open_kind(paths[0].string()), Catch::StartsWith("InvalidIndex: ") &&
                                                     Catch::Contains("m-00003-of-00003.gguf") &&
                                                     Catch::Contains("split.count 4"));
        paths = write_split(t.path(), "n", 3, 1, [](std::size_t p, auto& meta, auto&) {
            if (p == 1) meta = split_keys(0, 3, 3);
        });
        CHECK_THAT(open_kind(paths[2].string()), Catch::StartsWith("InvalidIndex: ") &&
                                                     Catch::Contains("n-00002-of-00003.gguf") &&
                                                     Catch::Contains("split.no 0, expected 1"));
        paths = write_split(t.path(), "k", 2, 1, [](std::size_t p, auto& meta, auto&) {
            if (p == 1) meta.clear();
        });
        CHECK_THAT(open_kind(paths[0].string()), Catch::StartsWith("InvalidIndex: ") && Catch::Contains("no split keys"));
        paths = write_split(t.path(), "s", 2, 1);
        write_u8_file(paths[1], std::vector<std::byte>(8));
        CHECK_THAT(open_kind(paths[0].string()), Catch::StartsWith("InvalidIndex: ") && Catch::Contains("not a GGUF file"));
    }
    SECTION("counts that do not add up, a tensor in two parts") {
        auto paths = write_split(t.path(), "c", 2, 2, [](std::size_t p, auto& meta, auto& recs) {
            if (p == 1) recs.pop_back();
            meta = split_keys(p, 2, 4);
        });
        CHECK_THAT(open_kind(paths[1].string()), Catch::StartsWith("InvalidIndex: ") &&
                                                     Catch::Contains("hold 3 tensors") && Catch::Contains("says 4"));
        paths = write_split(t.path(), "d", 2, 1, [](std::size_t, auto&, auto& recs) { recs[0].name = "same"; });
        CHECK_THAT(open_kind(paths[0].string()), Catch::StartsWith("InvalidIndex: ") && Catch::Contains("'same'"));
    }
    SECTION("split keys under a name that does not say where the other parts are") {
        const auto paths = write_split(t.path(), "m", 2, 1);
        fs::rename(paths[0], t / "renamed.gguf");
        CHECK_THAT(open_kind((t / "renamed.gguf").string()), Catch::StartsWith("InvalidIndex: ") &&
                                                                 Catch::Contains("renamed.gguf") &&
                                                                 Catch::Contains("-00001-of-00002.gguf"));
        reader_options alone;
        alone.gguf_split_set = false;
        CHECK(reader::open((t / "renamed.gguf").string(), alone).tensors().size() == 1);
    }
    SECTION("split keys of the wrong type") {
        const auto paths = write_split(t.path(), "m", 2, 1, [](std::size_t, auto& meta, auto&) {
            meta[meta.size() - 3] = gguf::metadata_entry::make("split.no", gguf::value_type::STRING, std::string_view("0"));
        });
        CHECK_THAT(open_kind(paths[1].string()), Catch::StartsWith("InvalidIndex: ") && Catch::Contains("split.no"));
    }
}

TEST_CASE("reader: a GGUF header far larger than the first read (a 150k-token vocabulary)") {
    temp_dir t;
    const auto meta = llama_metadata(150000, 300000);
    const auto recs = llama_tensors(4, 256, 150000);
    const std::uint64_t head = write_gguf_header_only(t / "big.gguf", meta, recs);
    CHECK(head > 4'000'000);
    reader r = reader::open((t / "big.gguf").string());
    CHECK(r.tensors().size() == recs.size());
    const gguf::metadata_entry* tokens = r.gguf()->find_key("tokenizer.ggml.tokens");
    REQUIRE(tokens);
    CHECK(tokens->count == 150000);
    CHECK(tokens->string_at(0) == "<0x00>");
    CHECK(r.gguf()->find_key("tokenizer.ggml.merges")->count == 300000);
    CHECK(r.shards()[0].data_start == head);
    // Refused beyond max_header_size.
    reader_options small;
    small.parse.max_header_size = 1u << 20;
    CHECK_THAT(open_kind((t / "big.gguf").string(), small), Catch::StartsWith("HeaderTooLarge: "));
}

TEST_CASE("reader: a safetensors index naming a GGUF file is InvalidIndex") {
    temp_dir t;
    fs::copy_file(valid_dir() / "type_F32.gguf", t / "x.gguf");
    write_file(t / "model.safetensors.index.json", std::string(R"({"weight_map":{"w":"x.gguf"}})"));
    CHECK_THAT(open_kind((t / "model.safetensors.index.json").string()),
               Catch::StartsWith("InvalidIndex: ") && Catch::Contains("'x.gguf' is a GGUF file"));
}
