// Tests for `ringsafe pack` and `ringsafe cp` through the built CLI.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstring>

#include "ringsafe/buffer.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"
#include "skip.hpp"
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

TEST_CASE("cp over an existing file keeps its permissions") {
    temp_dir d;
    auto src = d / "src.safetensors";
    auto x = pattern(1000, 7);
    {
        writer w(src.string());
        w.add("x", dtype::U8, {x.size()}, x);
        w.finish();
    }
    auto out = d / "out.safetensors";
    write_file(out, std::string("old"));
    REQUIRE(::chmod(out.c_str(), 0600) == 0);
    REQUIRE(run_command(cli_path() + " cp " + q(src) + " " + q(out) + " --no-sync").status == 0);
    CHECK(written_file(out).tensor("x") == x);
    struct stat st {};
    REQUIRE(::stat(out.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0600);
}

TEST_CASE("cp and ls of an index carry the shards' common __metadata__, never the index's total_size") {
    temp_dir d;
    auto shard = [&](const char* name, const char* tensor, const metadata_map& m) {
        writer w((d / name).string());
        w.add(tensor, dtype::U8, {10}, pattern(10, 3));
        w.finish(m);
    };
    shard("m-1.safetensors", "a", {{"format", "pt"}, {"step", "1"}});
    shard("m-2.safetensors", "b", {{"format", "pt"}, {"step", "2"}});
    auto index = d / "model.safetensors.index.json";
    write_file(index, std::string(R"({"metadata": {"total_size": 20}, "weight_map": )"
                                  R"({"a": "m-1.safetensors", "b": "m-2.safetensors"}})"));
    auto out = d / "merged.safetensors";
    REQUIRE(run_command(cli_path() + " cp " + q(index) + " " + q(out) + " --no-sync").status == 0);
    written_file f(out);
    CHECK(f.hdr.tensors.size() == 2);
    REQUIRE(f.hdr.metadata);
    CHECK(*f.hdr.metadata == metadata_map{{"format", "pt"}});
    auto r = run_command(cli_path() + " ls --json " + q(index));
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains(R"("metadata":{"format":"pt"})"));
    CHECK_THAT(r.out, !Catch::Contains("total_size"));
}

namespace {

// A checkpoint of `count` tensors of awkward sizes (unaligned, some of
// about `big` bytes, some empty) and its tensors' bytes, in file order;
// `patterned` false fills each tensor with one byte value (cheaper to make).
std::vector<std::pair<std::string, std::vector<std::byte>>> make_source(const fs::path& p, int count,
                                                                         std::uint64_t big, bool patterned = true) {
    std::vector<std::pair<std::string, std::vector<std::byte>>> tensors;
    writer_options o;
    o.sync = o.sync_dir = false;  // test input: durability does not matter
    writer w(p.string(), o);
    for (int i = 0; i < count; ++i) {
        std::uint64_t n = i % 7 == 6 ? 0 : i % 3 == 0 ? big + 13 * i : i % 3 == 1 ? 4096 * i + 3 : 300 + i;
        std::string name = "layer." + std::to_string(i) + ".w";
        tensors.emplace_back(name, patterned ? pattern(n, 500 + i) : std::vector<std::byte>(n, std::byte(i)));
        w.add(name, dtype::U8, {n}, tensors.back().second);
    }
    w.finish(metadata_map{{"format", "pt"}});
    return tensors;
}

// Peak RSS (KiB) of one `ringsafe cp` with `args`: the VmHWM it reports
// with --json (a forked child's ru_maxrss would also count this test
// process's pages, mapped in the child until exec); -1 when it failed.
long cp_peak_rss_kib(const std::string& args) {
    auto r = run_command(cli_path() + " cp " + args + " --json");
    auto at = r.out.find("\"peak_rss_kib\":");
    if (r.status != 0 || at == std::string::npos) return -1;
    return std::stol(r.out.substr(at + 15));
}

}  // namespace

TEST_CASE("cp through a small pipeline is byte-exact and accepted by the reader") {
    temp_dir d;
    auto src = d / "src.safetensors";
    auto tensors = make_source(src, 24, (3u << 20) / 2);
    // Buffer sizes below, at and above the tensor sizes; 1025K is rounded up to 4K.
    for (std::string opts : {"--buffer 1M --buffers 2", "--buffer 1025K --buffers 3", "--buffer 5M --buffers 2",
                             "--buffer 64M --buffers 4", "--buffer 1M --buffers 3 --no-direct"}) {
        INFO(opts);
        auto out = d / "out.safetensors";
        auto r = run_command(cli_path() + " cp " + q(src) + " " + q(out) + " --no-sync --json " + opts);
        REQUIRE(r.status == 0);
        CHECK_THAT(r.out, Catch::Contains("\"buffers\":"));
        written_file f(out);  // the format core's parser and layout checks
        REQUIRE(f.hdr.tensors.size() == tensors.size());
        for (std::size_t i = 0; i < tensors.size(); ++i) {
            CHECK(f.hdr.tensors[i].name == tensors[i].first);  // same order
            CHECK(f.tensor(tensors[i].first) == tensors[i].second);
        }
        CHECK(f.hdr.metadata->at("format") == "pt");
        // The reader takes it as well, and reads the same bytes.
        auto rd = reader::open(out.string());
        host_buffer dst(rd.all().bytes() + 1);
        rd.read_packed(rd.all(), dst.span(), 1);
        std::uint64_t at = 0;
        for (auto& [name, bytes] : tensors) {
            // An empty tensor's bytes have no data() to compare (memcmp's arguments must not be null).
            if (!bytes.empty()) CHECK(std::memcmp(dst.data() + at, bytes.data(), bytes.size()) == 0);
            at += bytes.size();
        }
        fs::remove(out);
        CHECK(dir_entries(d.path()) == std::vector<std::string>{"src.safetensors"});  // no temporary left
    }
}

TEST_CASE("cp refuses bad --buffer and --buffers values, naming the option, and writes nothing") {
    temp_dir d;
    auto src = d / "src.safetensors";
    make_source(src, 4, 1000);
    auto out = d / "out.safetensors";
    for (auto [opt, says] : std::vector<std::pair<std::string, std::string>>{
             {"--buffer 512K", "--buffer 512K: a buffer must hold 1M to 16G"},
             {"--buffer 0", "--buffer 0: a buffer must hold 1M to 16G"},
             {"--buffer 17G", "--buffer 17G: a buffer must hold 1M to 16G"},
             {"--buffer lots", "option --buffer: not a size: 'lots'"},
             {"--buffer", "option --buffer needs a value"},
             {"--buffers 1", "--buffers 1: need 2 to 1024 buffers"},
             {"--buffers 0", "--buffers 0: need 2 to 1024 buffers"},
             {"--buffers 1025", "--buffers 1025: need 2 to 1024 buffers"},
             {"--buffers -3", "option --buffers: not a number: '-3'"},
             {"--buffers 1024 --buffer 16G", "more than half of this machine's"}}) {
        INFO(opt);
        auto r = run_command(cli_path() + " cp " + q(src) + " " + q(out) + " " + opt + " 2>&1");
        CHECK(r.status == 2);
        CHECK_THAT(r.out, Catch::StartsWith("ringsafe cp: ") && Catch::Contains(says));
        CHECK_FALSE(fs::exists(out));
    }
}

TEST_CASE("cp's peak memory does not grow with the file size") {
    temp_dir d;
    // The same mix of tensors, the large ones 4x larger: 24 MiB and ~92 MiB files.
    make_source(d / "small.safetensors", 24, 3u << 20, false);
    make_source(d / "large.safetensors", 24, 12u << 20, false);
    REQUIRE(fs::file_size(d / "large.safetensors") > 3 * fs::file_size(d / "small.safetensors"));
    auto rss = [&](const std::string& name) {
        return cp_peak_rss_kib(q(d / name) + " " + q(d / ("copy_" + name)) + " --buffer 4M --buffers 3 --no-sync");
    };
    long small = rss("small.safetensors"), large = rss("large.safetensors");
    INFO("peak RSS small " << small << " KiB, large " << large << " KiB");
    REQUIRE(small > 0);
    REQUIRE(large > 0);
    // The file grew by ~68 MiB; the process may grow by the writer's staging
    // (bounded, 3 x 16 MiB) being touched further, never by the file.
    CHECK(large - small < 16 * 1024);
    // Buffers (12 MiB) + staging (48 MiB) + the program itself stay far below the file.
    CHECK(large < 100 * 1024);
    CHECK(reader::open((d / "copy_large.safetensors").string()).tensors().size() == 24);
}

TEST_CASE("pack and cp draw a progress bar on a terminal only") {
    temp_dir d;
    auto raw = pattern(3u << 20, 9);
    write_file(d / "w.bin", raw);
    const std::string pack = cli_path() + " pack " + q(d / "p.safetensors") + " --raw 'w:U8:" +
                             std::to_string(raw.size()) + ":" + (d / "w.bin").string() + "' --no-sync";
    const std::string cp = cli_path() + " cp " + q(d / "p.safetensors") + " " + q(d / "c.safetensors") +
                           " --buffer 1M --no-sync";
    // Not a terminal: no bar.
    auto r = run_command(pack + " 2>&1");
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, !Catch::Contains("100%"));
    r = run_command(cp + " 2>&1");
    REQUIRE(r.status == 0);
    CHECK_THAT(r.out, !Catch::Contains("100%"));
    CHECK(written_file(d / "c.safetensors").tensor("w") == raw);
    // On a pseudo-terminal (util-linux script): the bar reaches 100 %.
    if (run_command("command -v script").status != 0) SKIP("no script (util-linux): the pseudo-terminal half is not checked");
    fs::remove(d / "p.safetensors");
    fs::remove(d / "c.safetensors");
    for (auto& cmd : {pack, cp}) {
        INFO(cmd);
        r = run_command("script -qec \"" + cmd + "\" /dev/null");
        REQUIRE(r.status == 0);
        CHECK_THAT(r.out, Catch::Contains("100%") && Catch::Contains("3.00 MiB / 3.00 MiB"));
    }
}
