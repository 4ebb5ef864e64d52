// The `ringsafe ls` / `ringsafe verify` contract, run on the built CLI over
// every conformance file and on generated files.
#include <catch2/catch.hpp>

#include <boost/json.hpp>

#include <filesystem>

#include "conformance_cases.hpp"
#include "ringsafe/header.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace json = boost::json;

namespace {

struct cli_output {
    int status;
    std::string out;
    json::object doc;
};

// Runs `ringsafe ARGS` and parses its stdout as exactly one JSON line.
cli_output run_json(const std::string& args) {
    auto r = run_command(cli_path() + " " + args + " 2>/dev/null");
    INFO("ringsafe " << args << "\n" << r.out);
    REQUIRE(!r.out.empty());
    REQUIRE(r.out.back() == '\n');
    REQUIRE(r.out.find('\n') == r.out.size() - 1);
    return {r.status, r.out, json::parse(r.out).as_object()};
}

std::string quoted(const std::filesystem::path& p) { return std::string("'").append(p.string()).append("'"); }

void check_failure(const cli_output& r, std::string_view kind) {
    INFO(r.out);
    CHECK(r.status == 1);
    CHECK(r.doc.size() == 3);
    CHECK(r.doc.at("ok") == false);
    CHECK(r.doc.at("error_kind").as_string() == kind);
    CHECK(r.doc.at("error").as_string().size() > 10);
}

void check_listing(const cli_output& r, const expected_case& c, bool with_sha) {
    INFO(r.out);
    CHECK(r.status == 0);
    REQUIRE(r.doc.size() == 4);
    CHECK(r.doc.at("ok") == true);
    CHECK(r.doc.at("format") == "safetensors");
    auto& tensors = r.doc.at("tensors").as_array();
    REQUIRE(tensors.size() == c.tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        auto& t = tensors[i].as_object();
        const expected_tensor& e = c.tensors[i];
        CHECK(t.size() == (with_sha ? 5u : 4u));
        CHECK(t.at("name").as_string() == e.name);
        CHECK(t.at("dtype").as_string() == e.dtype);
        std::vector<std::uint64_t> shape;
        for (auto& d : t.at("shape").as_array()) shape.push_back(json::value_to<std::uint64_t>(d));
        CHECK(shape == e.shape);
        auto& off = t.at("data_offsets").as_array();
        REQUIRE(off.size() == 2);
        CHECK(json::value_to<std::uint64_t>(off[0]) == e.begin);
        CHECK(json::value_to<std::uint64_t>(off[1]) == e.end);
        if (with_sha) CHECK(t.at("sha256").as_string() == e.sha256);
    }
    auto& m = r.doc.at("metadata");
    REQUIRE(m.is_null() == !c.metadata);
    if (c.metadata) {
        std::map<std::string, std::string> got;
        for (auto& kv : m.as_object()) got[std::string(kv.key())] = std::string(kv.value().as_string());
        CHECK(got == *c.metadata);
    }
}

}  // namespace

TEST_CASE("ls --json and verify --json list every valid conformance file exactly") {
    for (auto& c : load_cases(conformance_dir() / "valid")) {
        INFO(c.file);
        for (bool verify : {false, true}) {
            auto r = run_json(std::string(verify ? "verify" : "ls") + " --json " + quoted(c.path));
            if (const deviation* d = find_deviation(c.file)) check_failure(r, d->error_kind);
            else check_listing(r, c, verify);
        }
    }
}

TEST_CASE("ls --json and verify --json report the reference's kind for every invalid file") {
    for (auto& c : load_cases(conformance_dir() / "invalid")) {
        INFO(c.file);
        check_failure(run_json("ls --json " + quoted(c.path)), c.error_kind);
        check_failure(run_json("verify --json " + quoted(c.path)), c.error_kind);
    }
}

TEST_CASE("unreadable sources are IoError with exit status 1") {
    temp_dir dir;
    check_failure(run_json("ls --json " + quoted(dir / "missing.safetensors")), "IoError");
    check_failure(run_json("verify --json " + quoted(dir.path())), "IoError");
    // Without --json: one line on stderr that names the source once (the error's own
    // message names it), or before the kind when the message does not.
    const std::string missing = (dir / "missing.safetensors").string();
    auto plain = run_command(cli_path() + " ls " + quoted(dir / "missing.safetensors") + " 2>&1");
    CHECK(plain.status == 1);
    CHECK(plain.out.rfind("ringsafe: IoError: ", 0) == 0);
    CHECK(plain.out.find(missing) != std::string::npos);
    CHECK(plain.out.find(missing) == plain.out.rfind(missing));
    auto bad = run_command(cli_path() + " ls " + quoted(conformance_dir() / "invalid" / "off_hole_between.safetensors") +
                           " 2>&1");
    CHECK(bad.status == 1);
    CHECK(bad.out.find("off_hole_between.safetensors") != std::string::npos);
}

TEST_CASE("bad usage exits 2; --help exits 0") {
    auto valid = quoted(conformance_dir() / "valid" / "scalars.safetensors");
    for (std::string cmd : {"ls", "verify"}) {
        INFO(cmd);
        CHECK(run_command(cli_path() + " " + cmd + " --json 2>/dev/null").status == 2);
        CHECK(run_command(cli_path() + " " + cmd + " 2>/dev/null").status == 2);
        CHECK(run_command(cli_path() + " " + cmd + " --bogus " + valid + " 2>/dev/null").status == 2);
        CHECK(run_command(cli_path() + " " + cmd + " " + valid + " " + valid + " 2>/dev/null").status == 2);
        CHECK(run_command(cli_path() + " " + cmd + " --max-header-size nope " + valid + " 2>/dev/null").status == 2);
        auto help = run_command(cli_path() + " " + cmd + " --help");
        CHECK(help.status == 0);
        CHECK(help.out.find("usage: ringsafe " + cmd) != std::string::npos);
    }
}

TEST_CASE("--max-header-size lowers the header limit") {
    auto path = quoted(conformance_dir() / "valid" / "scalars.safetensors");
    check_failure(run_json("ls --json --max-header-size 16 " + path), "HeaderTooLarge");
    CHECK(run_json("ls --json --max-header-size 1M " + path).status == 0);
}

TEST_CASE("without --json: a table and a summary line; failures go to stderr") {
    auto ok = run_command(cli_path() + " ls " + quoted(conformance_dir() / "valid" / "all_dtypes.safetensors"));
    CHECK(ok.status == 0);
    CHECK(ok.out.rfind("NAME", 0) == 0);
    CHECK(ok.out.find("t_bf16  ") != std::string::npos);
    CHECK(ok.out.find("20 tensors, ") != std::string::npos);
    auto ver = run_command(cli_path() + " verify " + quoted(conformance_dir() / "valid" / "scalar_single_f32.safetensors"));
    CHECK(ver.status == 0);
    CHECK(ver.out.find("SHA256") != std::string::npos);
    auto bad = run_command(cli_path() + " ls " + quoted(conformance_dir() / "invalid" / "off_hole_between.safetensors") +
                           " 2>/dev/null");
    CHECK(bad.status == 1);
    CHECK(bad.out.empty());
}

TEST_CASE("verify hashes tensors that straddle its 4 MiB read chunks") {
    temp_dir dir;
    const std::uint64_t sizes[] = {(3u << 20) + 1, 0, (6u << 20) - 5, 7, 0, (4u << 20)};
    std::vector<tensor_entry> entries;
    std::uint64_t off = 0;
    for (std::size_t i = 0; i < std::size(sizes); ++i) {
        entries.push_back({std::string("t").append(std::to_string(i)), dtype::U8, {sizes[i]}, off, off + sizes[i]});
        off += sizes[i];
    }
    std::string json = serialize_header(entries, nullptr);
    std::vector<std::byte> file(8 + json.size() + off);
    encode_length_prefix(json.size(), file.data());
    std::memcpy(file.data() + 8, json.data(), json.size());
    fill_pattern(std::span(file).subspan(8 + json.size()), 7);
    write_file(dir / "chunks.safetensors", file);
    auto r = run_json("verify --json " + quoted(dir / "chunks.safetensors"));
    REQUIRE(r.status == 0);
    auto& tensors = r.doc.at("tensors").as_array();
    REQUIRE(tensors.size() == entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
        auto bytes = std::span(file).subspan(8 + json.size() + entries[i].begin, sizes[i]);
        CHECK(tensors[i].at("sha256").as_string() == sha256_hex(bytes));
    }
}

TEST_CASE("verify reads a sparse 1 GiB tensor; ls answers from the header") {
    temp_dir dir;
    auto path = dir / "sparse.safetensors";
    std::vector<tensor_entry> one{{"zeros", dtype::U8, {1u << 30}, 0, 1u << 30}};
    std::string json = serialize_header(one, nullptr);
    std::string head(8, '\0');
    encode_length_prefix(json.size(), reinterpret_cast<std::byte*>(head.data()));
    write_file(path, head + json);
    std::filesystem::resize_file(path, 8 + json.size() + (std::uint64_t{1} << 30));
    auto ls = run_json("ls --json " + quoted(path));
    CHECK(ls.status == 0);
    CHECK(ls.doc.at("tensors").as_array().at(0).as_object().size() == 4);
    auto v = run_json("verify --json " + quoted(path));
    REQUIRE(v.status == 0);
    CHECK(v.doc.at("tensors").as_array().at(0).at("sha256").as_string() ==
          "49bc20df15e412a64472421e13fe86ff1c5165e18b2afccf160d4dc19fe68a14");
}

TEST_CASE("verify reports a file that is shorter than its header says") {
    temp_dir dir;
    auto bytes = read_file(conformance_dir() / "valid" / "medium_1mib.safetensors");
    bytes.resize(bytes.size() - 1);
    write_file(dir / "short.safetensors", bytes);
    check_failure(run_json("verify --json " + quoted(dir / "short.safetensors")), "MetadataIncompleteBuffer");
}
