// The `ringsafe load` and `ringsafe get` subcommands, run as a user would.
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <cstring>
#include <filesystem>
#include <map>

#include "checkpoint_bytes.hpp"

using namespace ringsafe::test;

namespace {

const std::vector<tensor_spec> specs = {
    {"model/embed", "F32", {64, 33}, 64 * 33 * 4},
    {"layers.0.w", "F16", {17, 5}, 17 * 5 * 2},
    {"layers.1.w", "BF16", {3, 7}, 3 * 7 * 2},
    {"flag", "BOOL", {}, 1},
    {"vec", "I64", {9}, 72},
};

std::string q(const std::filesystem::path& p) {
    std::string s("'");
    return s.append(p.string()).append("'");
}

run_result cli(const std::string& args) { return run_command(cli_path() + " " + args + " 2>&1"); }

std::uint64_t json_u64(const boost::json::object& o, const char* key) {
    return boost::json::value_to<std::uint64_t>(o.at(key));
}

}  // namespace

TEST_CASE("cli load: --json reports the bytes of the whole file or a selection", "[cli][load]") {
    temp_dir dir;
    write_file(dir / "m.safetensors", build_file(specs).bytes);
    std::uint64_t total = 0;
    for (auto& s : specs) total += s.bytes;

    auto r = run_command(cli_path() + " load --json " + q(dir / "m.safetensors"));
    REQUIRE(r.status == 0);
    auto o = boost::json::parse(r.out).as_object();
    CHECK(json_u64(o, "bytes") == total);
    CHECK(o.at("seconds").as_double() > 0);
    CHECK(o.contains("gbps"));

    r = run_command(cli_path() + " load --json --select 'layers.*' --select flag --chunk 4K --qd 2 --threads 1 " +
                    q(dir / "m.safetensors"));
    REQUIRE(r.status == 0);
    CHECK(json_u64(boost::json::parse(r.out).as_object(), "bytes") == 17 * 5 * 2 + 3 * 7 * 2 + 1);

    r = run_command(cli_path() + " load --pages small " + q(dir / "m.safetensors"));
    REQUIRE(r.status == 0);
    CHECK(r.out.find("loaded 5 tensors") != std::string::npos);
    CHECK(r.out.find("GB/s") != std::string::npos);
    CHECK(r.out.find("buffered, --mode auto") != std::string::npos);

    for (std::string mode : {"hot", "cold"}) {
        INFO("--mode " << mode);
        r = run_command(cli_path() + " load --mode " + mode + " --threads 2 --chunk 4K " + q(dir / "m.safetensors"));
        REQUIRE(r.status == 0);
        CHECK(r.out.find("loaded 5 tensors, " + std::to_string(total) + " bytes") != std::string::npos);
        CHECK(r.out.find("buffered, --mode " + mode) != std::string::npos);
    }
}

TEST_CASE("cli load: a sharded index, errors and usage", "[cli][load]") {
    temp_dir dir;
    write_file(dir / "s1.safetensors", build_file({specs[0], specs[1]}).bytes);
    write_file(dir / "s2.safetensors", build_file({specs[2]}).bytes);
    write_file(dir / "model.safetensors.index.json",
               std::string(R"({"weight_map": {"model/embed": "s1.safetensors", "layers.0.w": "s1.safetensors",)"
                           R"( "layers.1.w": "s2.safetensors"}})"));
    auto r = run_command(cli_path() + " load --json " + q(dir / "model.safetensors.index.json"));
    REQUIRE(r.status == 0);
    CHECK(json_u64(boost::json::parse(r.out).as_object(), "bytes") == specs[0].bytes + specs[1].bytes + specs[2].bytes);

    r = cli("load " + q(dir / "absent.safetensors"));
    CHECK(r.status == 1);
    CHECK(r.out.find("absent.safetensors") != std::string::npos);
    r = cli("load --select 'nothing*' " + q(dir / "s1.safetensors"));
    CHECK(r.status == 1);
    CHECK(r.out.find("nothing*") != std::string::npos);
    CHECK(cli("load").status == 2);
    CHECK(cli("load --qd 0 x").status == 2);
    CHECK(cli("load --pages giant x").status == 2);
    r = cli("load --mode warm x");
    CHECK(r.status == 2);
    CHECK(r.out.find("--mode takes auto, hot or cold, not 'warm'") != std::string::npos);
    r = cli("load --help");
    CHECK(r.status == 0);
    CHECK(r.out.find("--select PATTERN") != std::string::npos);
}

TEST_CASE("cli ls/verify go through the reader: a sharded index lists and hashes every shard", "[cli][index]") {
    temp_dir dir;
    // s1 holds a tensor larger than verify's 8 MiB batches, so it is hashed in pieces.
    std::vector<tensor_spec> s1 = {{"big", "U8", {9u << 20}, 9u << 20}, specs[1]};
    write_file(dir / "s1.safetensors", build_file(s1).bytes);
    write_file(dir / "s2.safetensors", build_file({specs[4]}).bytes);
    write_file(dir / "m.index.json",
               std::string(R"({"weight_map": {"big": "s1.safetensors", "layers.0.w": "s1.safetensors",)"
                           R"( "vec": "s2.safetensors"}})"));
    auto r = run_command(cli_path() + " verify --json " + q(dir / "m.index.json"));
    REQUIRE(r.status == 0);
    auto doc = boost::json::parse(r.out).as_object();
    auto& ts = doc.at("tensors").as_array();
    REQUIRE(ts.size() == 3);
    std::map<std::string, std::string> sums;
    for (auto& t : ts) sums[std::string(t.at("name").as_string())] = std::string(t.at("sha256").as_string());
    CHECK(sums["big"] == sha256_hex(tensor_bytes("big", 9u << 20)));
    CHECK(sums["layers.0.w"] == sha256_hex(tensor_bytes("layers.0.w", 17 * 5 * 2)));
    CHECK(sums["vec"] == sha256_hex(tensor_bytes("vec", 72)));
    r = run_command(cli_path() + " ls --json " + q(dir / "m.index.json"));
    REQUIRE(r.status == 0);
    CHECK(boost::json::parse(r.out).at("tensors").as_array().size() == 3);
}

TEST_CASE("cli load, get, cp: the error kind on stderr, a JSON error with --json, --max-header-size",
          "[cli][load][get][cp]") {
    temp_dir dir;
    const auto file = dir / "m.safetensors";
    write_file(file, build_file(specs).bytes);
    const std::string out = q(dir / "out.safetensors"), to = q(dir / "got");

    // The kind, as ls and cp print it.
    auto r = cli("load " + q(dir / "absent.safetensors"));
    CHECK(r.status == 1);
    CHECK(r.out.rfind("ringsafe load: IoError: ", 0) == 0);
    r = cli("load --select 'nothing*' " + q(file));
    CHECK(r.out.rfind("ringsafe load: TensorNotFound: ", 0) == 0);
    r = cli("get " + q(file) + " nothing -o " + to);
    CHECK(r.out.rfind("ringsafe get: TensorNotFound: ", 0) == 0);

    // --json: one JSON object on stdout, nothing on stderr.
    for (const std::string& cmd : {"load --json " + q(dir / "absent.safetensors"),
                                  "cp --json " + q(dir / "absent.safetensors") + " " + out}) {
        INFO(cmd);
        auto j = run_command(cli_path() + " " + cmd + " 2>/dev/null");
        CHECK(j.status == 1);
        auto doc = boost::json::parse(j.out).as_object();
        CHECK(doc.at("ok") == false);
        CHECK(doc.at("error_kind") == "IoError");
        CHECK(std::string(doc.at("error").as_string()).find("absent.safetensors") != std::string::npos);
        CHECK(run_command(cli_path() + " " + cmd + " 2>&1 >/dev/null").out.empty());
    }

    // --max-header-size on every command that reads a header.
    const std::vector<std::string> readers = {"ls " + q(file), "verify " + q(file), "load " + q(file),
                                              "get " + q(file) + " vec -o " + to, "cp " + q(file) + " " + out};
    for (auto& cmd : readers) {
        INFO(cmd);
        r = cli(cmd + " --max-header-size 16");
        CHECK(r.status == 1);
        CHECK(r.out.find("HeaderTooLarge") != std::string::npos);
        CHECK(cli(cmd + " --max-header-size 1M").status == 0);
    }
}

TEST_CASE("cli get: .npy for numpy dtypes, raw .bin otherwise, sanitized names", "[cli][get]") {
    temp_dir dir;
    write_file(dir / "m.safetensors", build_file(specs).bytes);
    auto out = dir / "out";
    auto r = cli("get " + q(dir / "m.safetensors") + " model/embed layers.1.w flag vec -o " + q(out));
    REQUIRE(r.status == 0);

    // model/embed -> model_embed.npy: parse the header by hand.
    auto f = read_file(out / "model_embed.npy");
    REQUIRE(f.size() > 10);
    CHECK(std::memcmp(f.data(), "\x93NUMPY\x01\x00", 8) == 0);
    const std::size_t hlen = std::to_integer<std::size_t>(f[8]) | std::to_integer<std::size_t>(f[9]) << 8;
    CHECK((10 + hlen) % 64 == 0);
    std::string dict(reinterpret_cast<const char*>(f.data()) + 10, hlen);
    CHECK(dict == "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 33), }" +
                      std::string(hlen - 61 - 1, ' ') + "\n");
    CHECK(std::vector<std::byte>(f.begin() + 10 + hlen, f.end()) == tensor_bytes("model/embed", 64 * 33 * 4));

    auto b = read_file(out / "layers.1.w.bin");  // BF16: raw bytes
    CHECK(b == tensor_bytes("layers.1.w", 42));
    auto flag = read_file(out / "flag.npy");
    std::string fd(reinterpret_cast<const char*>(flag.data()) + 10, 64);
    CHECK(fd.find("'descr': '|b1'") != std::string::npos);
    CHECK(fd.find("'shape': ()") != std::string::npos);
    auto vec = read_file(out / "vec.npy");
    std::string vd(reinterpret_cast<const char*>(vec.data()) + 10, 64);
    CHECK(vd.find("'shape': (9,)") != std::string::npos);
    CHECK(vd.find("'<i8'") != std::string::npos);
    for (auto& e : std::filesystem::directory_iterator(out))
        CHECK(e.path().filename().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("cli get: refusals leave no files behind", "[cli][get]") {
    temp_dir dir;
    write_file(dir / "m.safetensors",
               build_file({{"a/b", "U8", {2}, 2}, {"a_b", "U8", {2}, 2}, {"c", "U8", {1}, 1}}).bytes);
    auto out = dir / "out";
    auto r = cli("get " + q(dir / "m.safetensors") + " c missing -o " + q(out));
    CHECK(r.status == 1);
    CHECK(r.out.find("'missing'") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out / "c.npy"));
    r = cli("get " + q(dir / "m.safetensors") + " a/b a_b -o " + q(out));
    CHECK(r.status == 1);
    CHECK(r.out.find("a_b.npy") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out / "a_b.npy"));
    CHECK(cli("get " + q(dir / "m.safetensors") + " c").status == 2);
    CHECK(cli("get --help").status == 0);
}
