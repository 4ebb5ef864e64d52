// Tests for `ringsafe pack` and `ringsafe cp` through the built CLI.
#include <catch2/catch.hpp>

#include <cstring>

#include "ringsafe/writer.hpp"
#include "written_file.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

// Writes a .npy file of format `version` with the given header fields.
void write_npy(const fs::path& p, const std::string& descr, const std::string& shape, bool fortran,
               const std::vector<std::byte>& data, int version = 1) {
    std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
    std::size_t pre = version == 1 ? 10 : 12;
    while ((pre + dict.size() + 1) % 64) dict += ' ';
    dict += '\n';
    std::string out = "\x93NUMPY";
    out += static_cast<char>(version);
    out += '\0';
    for (std::size_t i = 0; i < (version == 1 ? 2u : 4u); ++i) out += static_cast<char>((dict.size() >> (8 * i)) & 0xFF);
    out += dict;
    out.append(reinterpret_cast<const char*>(data.data()), data.size());
    write_file(p, out);
}

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

}  // namespace

TEST_CASE("pack writes .npy (v1, v2, v3) and raw inputs, named and typed as given") {
    temp_dir d;
    auto w = pattern(24, 1), b = pattern(5, 2), s = pattern(8, 3), raw = pattern(16, 4);
    write_npy(d / "weight.npy", "<f4", "(2, 3)", false, w, 1);
    write_npy(d / "bias.npy", "|u1", "(5,)", false, b, 2);
    write_npy(d / "scale.npy", "<f8", "()", false, s, 3);
    write_file(d / "raw.bin", raw);
    auto out = d / "out.safetensors";
    auto r = run_command(cli_path() + " pack " + q(out) + " " + q(d / "weight.npy") + " " + q(d / "bias.npy") + " " +
                         q(d / "scale.npy") + " --raw 'x:y:BF16:2x4:" + (d / "raw.bin").string() +
                         "' --metadata format=pt --no-sync");
    REQUIRE(r.status == 0);
    written_file f(out);
    CHECK(f.hdr.at("weight").dtype == dtype::F32);
    CHECK(f.hdr.at("weight").shape == std::vector<std::uint64_t>{2, 3});
    CHECK(f.tensor("weight") == w);
    CHECK(f.hdr.at("bias").dtype == dtype::U8);
    CHECK(f.tensor("bias") == b);
    CHECK(f.hdr.at("scale").shape.empty());
    CHECK(f.tensor("scale") == s);
    CHECK(f.hdr.at("x:y").dtype == dtype::BF16);
    CHECK(f.tensor("x:y") == raw);
    CHECK(f.hdr.metadata->at("format") == "pt");
}

TEST_CASE("pack refuses unusable inputs and leaves nothing at OUT") {
    temp_dir d;
    auto out = d / "out.safetensors";
    auto data = pattern(24, 1);
    write_npy(d / "good.npy", "<f4", "(2, 3)", false, data);
    write_npy(d / "fortran.npy", "<f4", "(2, 3)", true, data);
    write_npy(d / "big.npy", ">f4", "(2, 3)", false, data);
    write_npy(d / "object.npy", "|O", "(3,)", false, data);
    write_npy(d / "short.npy", "<f4", "(2, 4)", false, data);
    write_file(d / "notnpy.npy", std::string("hello"));
    for (std::string bad : {"fortran", "big", "object", "short", "notnpy"}) {
        INFO(bad);
        auto r = run_command(cli_path() + " pack " + q(out) + " " + q(d / "good.npy") + " " + q(d / (bad + ".npy")) +
                             " 2>&1");
        CHECK(r.status == 1);
        CHECK_THAT(r.out, Catch::Contains(bad + ".npy"));
        CHECK_FALSE(fs::exists(out));
    }
    CHECK(run_command(cli_path() + " pack " + q(out) + " 2>&1").status == 2);
    CHECK(run_command(cli_path() + " pack " + q(out) + " --raw nonsense 2>&1").status == 2);
    CHECK(run_command(cli_path() + " pack " + q(out) + " --raw 'a:Q8:2:x' 2>&1").status == 2);
    CHECK(run_command(cli_path() + " pack --help").status == 0);
    CHECK_FALSE(fs::exists(out));
}

TEST_CASE("cp copies a selection with its metadata in one pass, bytes intact") {
    temp_dir d;
    auto src = d / "src.safetensors";
    std::vector<std::pair<std::string, std::vector<std::byte>>> tensors;
    {
        writer w(src.string());
        for (int i = 0; i < 12; ++i) {
            std::uint64_t n = (i % 3 == 0) ? (3u << 20) + 17 * i : 1000 + i;  // some larger than the 1 MiB buffers
            std::string name = (i % 2 ? "model.mlp." : "model.attn.") + std::to_string(i);
            tensors.emplace_back(name, pattern(n, 60 + i));
            w.add(name, dtype::U8, {n}, tensors.back().second);
        }
        w.add("empty", dtype::F32, {0}, {});
        w.finish(metadata_map{{"origin", "test"}});
    }
    auto out = d / "mlp.safetensors";
    auto r = run_command(cli_path() + " cp " + q(src) + " " + q(out) +
                         " --select 'model.mlp.*' --select empty --buffer 1M --buffers 3 --no-sync --json");
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("\"gbps\""));
    written_file f(out);
    std::size_t expected = 1;
    for (auto& [name, bytes] : tensors) {
        if (name.rfind("model.mlp.", 0) != 0) {
            CHECK_FALSE(f.hdr.find(name));
            continue;
        }
        ++expected;
        CHECK(f.tensor(name) == bytes);
    }
    CHECK(f.hdr.tensors.size() == expected);
    CHECK(f.hdr.metadata->at("origin") == "test");

    auto all = d / "all.safetensors";
    REQUIRE(run_command(cli_path() + " cp " + q(src) + " " + q(all) + " --no-sync").status == 0);
    written_file a(all);
    for (auto& [name, bytes] : tensors) CHECK(a.tensor(name) == bytes);

    CHECK(run_command(cli_path() + " cp " + q(d / "missing.safetensors") + " " + q(d / "x.safetensors") + " 2>&1").status == 1);
    CHECK_FALSE(fs::exists(d / "x.safetensors"));
    CHECK(run_command(cli_path() + " cp " + q(src) + " 2>&1").status == 2);
}
