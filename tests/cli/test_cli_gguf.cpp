// `ringsafe ls` / `verify` / `get` on GGUF sources, as processes: every
// GGUF conformance case's verdict, metadata (types, values, file order),
// tensor records and hashes, from files and over http:// (nginx), against
// expected.jsonl; the split corpus as one model and each part alone; the
// human table (what a person looks for first, a 150k-token vocabulary cut
// short); raw blocks out of `get`.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <atomic>
#include <filesystem>
#include <thread>

#include "gguf_cases.hpp"
#include "gguf_files.hpp"
#include "http_harness.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

json::object parse_line(const run_result& r) {
    INFO(r.out);
    REQUIRE(!r.out.empty());
    REQUIRE(r.out.find('\n') == r.out.size() - 1);
    return json::parse(r.out).as_object();
}

std::vector<std::uint64_t> dims(const json::value& v) {
    std::vector<std::uint64_t> out;
    for (auto& d : v.as_array()) out.push_back(json::value_to<std::uint64_t>(d));
    return out;
}

void check_metadata(const json::object& doc, const gguf_case& c) {
    const auto& m = doc.at("metadata").as_array();
    REQUIRE(m.size() == c.metadata.size());
    for (std::size_t i = 0; i < m.size(); ++i) {
        const auto& e = m[i].as_object();
        const gguf_expected_entry& x = c.metadata[i];
        INFO("metadata " << i << " " << x.key);
        CHECK(e.at("key").as_string() == x.key);
        CHECK(e.at("type").as_string() == x.type);
        CHECK(e.size() == (x.element_type ? 4u : 3u));
        if (x.element_type) CHECK(e.at("element_type").as_string() == *x.element_type);
        CHECK(gguf_value_matches(e.at("value"), x.value));
    }
}

// The records of `c`'s tensors at tensors[first...], each with its part's split.no when `part` is set.
void check_tensors(const json::array& tensors, std::size_t first, const gguf_case& c, bool with_sha,
                   std::optional<std::uint64_t> part) {
    REQUIRE(tensors.size() >= first + c.tensors.size());
    for (std::size_t i = 0; i < c.tensors.size(); ++i) {
        const auto& t = tensors[first + i].as_object();
        const gguf_expected_tensor& x = c.tensors[i];
        INFO("tensor " << x.name);
        CHECK(t.size() == 6u + with_sha + part.has_value());
        CHECK(t.at("name").as_string() == x.name);
        CHECK(t.at("type").as_string() == x.type);
        CHECK(dims(t.at("shape")) == x.shape);
        CHECK(dims(t.at("ne")) == x.ne);
        CHECK(json::value_to<std::uint64_t>(t.at("offset")) == x.offset);
        CHECK(json::value_to<std::uint64_t>(t.at("nbytes")) == x.nbytes);
        if (with_sha) CHECK(t.at("sha256").as_string() == x.sha256);
        if (part) CHECK(json::value_to<std::uint64_t>(t.at("split")) == *part);
    }
}

// A file alone: every field of its line of expected.jsonl.
void check_file(const run_result& r, const gguf_case& c, bool with_sha) {
    INFO(c.file << "\n" << r.out);
    const json::object doc = parse_line(r);
    if (!c.ok) {
        CHECK(r.status == 1);
        CHECK(doc.size() == 3);
        CHECK(doc.at("ok") == false);
        CHECK(doc.at("error_kind").as_string() == c.error_kind);
        CHECK(doc.at("error").as_string().size() > 10);
        return;
    }
    CHECK(r.status == 0);
    CHECK(doc.size() == 8);
    CHECK(doc.at("ok") == true);
    CHECK(doc.at("format") == "gguf");
    CHECK(json::value_to<std::uint64_t>(doc.at("version")) == c.version);
    CHECK(json::value_to<std::uint64_t>(doc.at("alignment")) == c.alignment);
    CHECK(json::value_to<std::uint64_t>(doc.at("data_offset")) == c.data_offset);
    check_metadata(doc, c);
    CHECK(doc.at("tensors").as_array().size() == c.tensors.size());
    check_tensors(doc.at("tensors").as_array(), 0, c, with_sha, std::nullopt);
    const auto& s = doc.at("split");
    REQUIRE(s.is_null() == !c.split);
    if (c.split) {
        CHECK(json::value_to<std::uint64_t>(s.at("no")) == c.split->no);
        CHECK(json::value_to<std::uint64_t>(s.at("count")) == c.split->count);
        CHECK(json::value_to<std::uint64_t>(s.at("tensors_count")) == c.split->tensors_count);
    }
}

// A part of the split corpus opened as the set: the first part's header, every part's tensors.
void check_set(const run_result& r, const std::vector<const gguf_case*>& parts, bool with_sha) {
    INFO(r.out);
    const json::object doc = parse_line(r);
    CHECK(r.status == 0);
    const gguf_case& first = *parts[0];
    CHECK(json::value_to<std::uint64_t>(doc.at("data_offset")) == first.data_offset);
    check_metadata(doc, first);
    const auto& tensors = doc.at("tensors").as_array();
    std::size_t at = 0;
    for (const gguf_case* p : parts) {
        check_tensors(tensors, at, *p, with_sha, p->split->no);
        at += p->tensors.size();
    }
    CHECK(tensors.size() == at);
    const auto& s = doc.at("split").as_object();
    CHECK(json::value_to<std::uint64_t>(s.at("count")) == 3);
    CHECK(json::value_to<std::uint64_t>(s.at("tensors_count")) == at);
    const auto& listed = s.at("parts").as_array();
    REQUIRE(listed.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(std::string(listed[i].at("spec").as_string()).ends_with(parts[i]->file));
        CHECK(json::value_to<std::uint64_t>(listed[i].at("data_offset")) == parts[i]->data_offset);
        CHECK(json::value_to<std::uint64_t>(listed[i].at("tensors")) == parts[i]->tensors.size());
    }
}

std::vector<const gguf_case*> split_parts_of(const std::vector<gguf_case>& all) {
    std::vector<const gguf_case*> out(3);
    for (auto& c : all)
        if (c.split) out.at(c.split->no) = &c;
    return out;
}

// Runs `commands` four at a time.
std::vector<run_result> run_all(const std::vector<std::string>& commands) {
    std::vector<run_result> out(commands.size());
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t)
        pool.emplace_back([&] {
            for (std::size_t i; (i = next++) < commands.size();) out[i] = run_command(commands[i] + " 2>/dev/null");
        });
    for (auto& t : pool) t.join();
    return out;
}

// Every case through `ls --json` and `verify --json` of `spec_of(case)`.
void check_every_case(const std::function<std::string(const gguf_case&)>& spec_of) {
    const auto all = all_gguf_cases();
    REQUIRE(all.size() >= 120);
    const auto parts = split_parts_of(all);
    std::vector<std::string> commands;
    for (const gguf_case& c : all)
        for (const char* cmd : {"ls", "verify"})
            commands.push_back(quoted(cli_path()) + " " + cmd + " --json " + (c.split ? "--one-file " : "") +
                               quoted(spec_of(c)));
    for (const gguf_case* p : parts)
        for (const char* cmd : {"ls", "verify"})
            commands.push_back(quoted(cli_path()) + " " + cmd + " --json " + quoted(spec_of(*p)));
    const auto results = run_all(commands);
    std::size_t k = 0;
    for (const gguf_case& c : all)
        for (bool verify : {false, true}) check_file(results[k++], c, verify);
    for (std::size_t p = 0; p < parts.size(); ++p)
        for (bool verify : {false, true}) {
            INFO("the set from " << parts[p]->file);
            check_set(results[k++], parts, verify);
        }
}

}  // namespace

TEST_CASE("ls/verify --json: every GGUF conformance case from its file, as ggml reports it") {
    check_every_case([](const gguf_case& c) { return c.path.string(); });
}

TEST_CASE("ls/verify --json: every GGUF conformance case over http:// (nginx)") {
    temp_dir tmp;
    fs::create_directories(tmp / "www");
    fs::copy(gguf_conformance_dir(), tmp / "www", fs::copy_options::recursive);
    nginx_server ng(tmp / "nginx", {tmp / "www", "", "", nullptr, 1, 0});
    check_every_case([&](const gguf_case& c) {
        return ng.base_url() + "/" + (c.ok ? "valid/" : "invalid/") + c.file;
    });
}

TEST_CASE("ls of GGUF for people: the model first, long arrays cut, nothing a terminal acts on") {
    const auto valid = gguf_conformance_dir() / "valid";
    auto r = run_command(quoted(cli_path()) + " ls " + quoted((valid / "meta_llama.gguf").string()));
    CHECK(r.status == 0);
    for (const char* line : {"GGUF v3, alignment 32, data section at byte 2016\n", "architecture   llama\n",
                             "name           tiny-llama-test\n", "parameters     792 (792)\n",
                             "quantization   MOSTLY_F16 (general.file_type 1); tensors: F16 x9 F32 x3\n",
                             "context length 64\n", "\nNAME  ", "metadata tokenizer.ggml.tokens ARRAY of 12 STRING = [",
                             "12 tensors, "})
        CHECK_THAT(r.out, Catch::Contains(line));
    // 150k tokens and 300k merges: a few lines, each array cut to its first elements.
    temp_dir t;
    write_gguf_header_only(t / "big.gguf", llama_metadata(150000, 300000), llama_tensors(2, 256, 150000));
    auto big = run_command(quoted(cli_path()) + " ls " + quoted((t / "big.gguf").string()));
    CHECK(big.status == 0);
    CHECK(big.out.size() < 20000);
    CHECK_THAT(big.out, Catch::Contains("metadata tokenizer.ggml.tokens ARRAY of 150000 STRING = [\"<0x00>\", ") &&
                            Catch::Contains(" more]") && Catch::Contains("quantization   MOSTLY_Q4_K_M") &&
                            Catch::Contains("context length 131072") && Catch::Contains("chat_template STRING = \"{%"));
    // The split corpus: the set.
    auto set = run_command(quoted(cli_path()) + " verify " + quoted((valid / "split_model-00003-of-00003.gguf").string()));
    CHECK(set.status == 0);
    CHECK_THAT(set.out, Catch::Contains("one model in 3 split files") && Catch::Contains("6 tensors, ") &&
                            Catch::Contains("SHA256"));
    // Hostile strings are escaped in the table, raw (JSON-escaped) in --json.
    const std::vector<gguf::metadata_entry> evil{
        gguf::metadata_entry::make("general.name", gguf::value_type::STRING, std::string_view("\x1b]0;owned\x07\xff")),
    };
    write_file(t / "evil.gguf", make_gguf(evil, {{"w\x1b[2J", ggml_type::F32, {2}}}));
    auto e = run_command(quoted(cli_path()) + " ls " + quoted((t / "evil.gguf").string()));
    CHECK(e.status == 0);
    CHECK(e.out.find('\x1b') == std::string::npos);
    CHECK_THAT(e.out, Catch::Contains("\\e]0;owned\\x07\\xff") && Catch::Contains("w\\e[2J"));
    auto ej = run_command(quoted(cli_path()) + " ls --json " + quoted((t / "evil.gguf").string()));
    const auto doc = parse_line(ej);
    CHECK(doc.at("metadata").as_array()[0].at("value").as_string() == "\x1b]0;owned\x07\xef\xbf\xbd");  // not UTF-8: U+FFFD
    CHECK(doc.at("tensors").as_array()[0].at("name").as_string() == "w\x1b[2J");
}

TEST_CASE("get: plain GGUF tensors as .npy, block types as their raw blocks") {
    const auto valid = gguf_conformance_dir() / "valid";
    std::map<std::string, std::string> want;
    for (auto& c : load_gguf_cases(valid))
        if (c.file == "shape_many.gguf")
            for (auto& x : c.tensors) want[x.name] = x.sha256;
    temp_dir t;
    auto r = run_command(quoted(cli_path()) + " get " + quoted((valid / "shape_many.gguf").string()) +
                         " blk.2.w blk.0.w -o " + quoted(t.path().string()));
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("Q8_0 blk.2.w, 68 bytes of raw blocks"));
    CHECK(sha256_hex(read_file(t / "blk.2.w.bin")) == want.at("blk.2.w"));
    const auto npy = read_file(t / "blk.0.w.npy");
    REQUIRE(npy.size() > 12);
    const std::string head(reinterpret_cast<const char*>(npy.data()), npy.size() - 12);
    CHECK_THAT(head, Catch::Contains("'descr': '<f4'") && Catch::Contains("'shape': (3,)"));
    CHECK(sha256_hex(std::span(npy).last(12)) == want.at("blk.0.w"));
    auto help = run_command(quoted(cli_path()) + " get --help");
    CHECK_THAT(help.out, Catch::Contains("raw blocks"));
}

TEST_CASE("load: a GGUF file, a split set as one model, a selection; --max-header-size caps a GGUF header") {
    const auto valid = gguf_conformance_dir() / "valid";
    const auto cases = load_gguf_cases(valid);
    auto bytes_of = [&](const std::string& file, std::string_view prefix = "") {
        std::uint64_t n = 0;
        for (auto& c : cases)
            if (c.file == file)
                for (auto& t : c.tensors)
                    if (t.name.starts_with(prefix)) n += t.nbytes;
        return n;
    };
    auto load = [](const std::string& args) {
        auto r = run_command(quoted(cli_path()) + " load --json " + args);
        INFO(r.out);
        CHECK(r.status == 0);
        return json::value_to<std::uint64_t>(parse_line(r).at("bytes"));
    };
    const std::string many = quoted((valid / "shape_many.gguf").string());
    CHECK(load(many) == bytes_of("shape_many.gguf"));  // block types as their raw blocks
    CHECK(load("--select 'blk.2*' " + many) == bytes_of("shape_many.gguf", "blk.2"));
    std::uint64_t set = 0;
    for (int no = 1; no <= 3; ++no) set += bytes_of("split_model-0000" + std::to_string(no) + "-of-00003.gguf");
    CHECK(load(quoted((valid / "split_model-00002-of-00003.gguf").string())) == set);

    // meta_llama.gguf's tensor infos end past 1984 (its data section, at 2016, is their padded end).
    const std::string llama = quoted((valid / "meta_llama.gguf").string());
    for (const char* cmd : {"ls", "verify", "load"}) {
        INFO(cmd);
        auto low = run_command(quoted(cli_path()) + " " + cmd + " --json --max-header-size 1984 " + llama);
        CHECK(low.status == 1);
        CHECK(parse_line(low).at("error_kind") == "HeaderTooLarge");
        CHECK(run_command(quoted(cli_path()) + " " + cmd + " --json --max-header-size 2016 " + llama).status == 0);
    }
}

TEST_CASE("--help of ls, verify and load says what they do with GGUF") {
    for (const char* cmd : {"ls", "verify", "load"}) {
        INFO(cmd);
        auto help = run_command(quoted(cli_path()) + " " + cmd + " --help");
        CHECK(help.status == 0);
        CHECK_THAT(help.out, Catch::Contains("GGUF file") && Catch::Contains("split GGUF set") &&
                                 Catch::Contains("GGUF's\n"));  // --max-header-size's meaning for GGUF
    }
    for (const char* cmd : {"ls", "verify"})
        CHECK_THAT(run_command(quoted(cli_path()) + " " + cmd + " --help").out,
                   Catch::Contains("\"format\":\"gguf\"") || Catch::Contains("as `ringsafe ls --json`"));
    CHECK_THAT(run_command(quoted(cli_path()) + " verify --help").out, Catch::Contains("--one-file"));
    CHECK_THAT(run_command(quoted(cli_path()) + " load --help").out, Catch::Contains("raw blocks"));
    CHECK_THAT(run_command(quoted(cli_path()) + " --help").out, Catch::Contains("safetensors and GGUF"));
}
