// The CLI on hf:// URLs, as a process, against the Hub stand-in: ls, verify,
// load, get and cp read them; --cache writes the Hub cache (a copy's two
// readers share each file's entry), which later runs read with no request and
// HF_HUB_OFFLINE=1 alone; HF_TOKEN opens a gated repo, its absence is named.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>

#include "checkpoint_bytes.hpp"
#include "http_harness.hpp"
#include "ringsafe/reader.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

const std::vector<tensor_spec> tensors = {
    {"layer.a", "F32", {1000, 30}, 120'000}, {"layer.b", "U8", {70'000}, 70'000}, {"norm", "F16", {3, 5}, 30}};

struct cli_site {
    temp_dir tmp;
    hub_standin hub{tmp / "hub"};
    fs::path cache = tmp / "cache";
    std::string commit;
    cli_site() {
        built_file f = build_file(tensors);
        commit = hub.add_repo("org/cli", {{"model.safetensors", f.bytes}});
    }
    // The CLI with the stand-in as HF_ENDPOINT, `cache` as HF_HUB_CACHE, no token but `env`'s.
    run_result cli(const std::string& args, const std::string& env = "") const {
        return run_command("env -u HF_TOKEN -u HUGGING_FACE_HUB_TOKEN -u HF_HUB_OFFLINE -u TRANSFORMERS_OFFLINE "
                           "HF_HOME=" + (tmp / "hf_home").string() + " HF_ENDPOINT=" + hub.endpoint() +
                           " HF_HUB_CACHE=" + cache.string() + " " + env + " " + cli_path() + " " + args + " 2>&1");
    }
};

}  // namespace

TEST_CASE("ringsafe ls, verify, load and get read hf:// URLs") {
    cli_site s;
    auto r = s.cli("ls hf://org/cli");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("layer.a") && Catch::Contains("3 tensors"));
    CHECK(s.cli("verify hf://org/cli/model.safetensors").status == 0);
    r = s.cli("load hf://org/cli --json");
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Catch::Contains("\"bytes\":190030"));
    r = s.cli("get hf://org/cli@" + s.commit + " layer.b -o " + (s.tmp / "out").string());
    CHECK(r.status == 0);
    CHECK(fs::exists(s.tmp / "out" / "layer.b.npy"));
    CHECK_FALSE(fs::exists(s.cache));  // nothing cached without --cache
    r = s.cli("ls hf://org/missing");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains("org/missing"));
}

TEST_CASE("ringsafe cp --cache and load --cache write the Hub cache; later runs read it with no request, offline too") {
    cli_site s;
    auto r = s.cli("cp hf://org/cli " + (s.tmp / "copy.safetensors").string() + " --cache --buffer 1M");
    REQUIRE(r.status == 0);
    const fs::path snap = s.cache / "models--org--cli" / "snapshots" / s.commit / "model.safetensors";
    CHECK(fs::is_symlink(snap));
    CHECK(read_file(snap) == build_file(tensors).bytes);
    CHECK(read_file(s.tmp / "copy.safetensors").size() > 0);

    const auto before = s.hub.requests().size();
    CHECK(s.cli("verify hf://org/cli").status == 0);
    CHECK(s.cli("load hf://org/cli", "HF_HUB_OFFLINE=1").status == 0);
    CHECK(s.hub.requests().size() == before);

    // Offline, a file not in the cache is named, with where it was looked for.
    r = s.cli("ls hf://org/cli/other.safetensors", "HF_HUB_OFFLINE=1");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains("not in the Hub cache") && Catch::Contains("other.safetensors"));

    // A sharded second repo through load --cache: the index and every shard land.
    std::string weight_map;
    std::map<std::string, std::vector<std::byte>> files;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const std::string name = "part-" + std::to_string(i) + ".safetensors";
        files[name] = build_file({tensors[i]}).bytes;
        weight_map += (weight_map.empty() ? "\"" : ",\"") + tensors[i].name + "\":\"" + name + "\"";
    }
    const std::string index = "{\"weight_map\":{" + weight_map + "}}";
    files["model.safetensors.index.json"] = std::vector<std::byte>(reinterpret_cast<const std::byte*>(index.data()),
                                                                   reinterpret_cast<const std::byte*>(index.data()) + index.size());
    const std::string c = s.hub.add_repo("org/parts", files);
    REQUIRE(s.cli("load hf://org/parts --cache").status == 0);
    for (auto& [name, bytes] : files)
        CHECK(read_file(s.cache / "models--org--parts" / "snapshots" / c / name) == bytes);
}

TEST_CASE("the CLI sends HF_TOKEN to the Hub for a gated repo, never to the CDN, and names a missing one") {
    cli_site s;
    s.hub.add_repo("org/gated", {{"model.safetensors", build_file(tensors).bytes}});
    s.hub.control("org/gated", "gated", "hf_cli_secret");
    auto r = s.cli("ls hf://org/gated");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains("org/gated") && Catch::Contains("token is needed"));
    r = s.cli("ls hf://org/gated", "HF_TOKEN=hf_cli_secret");
    CHECK(r.status == 0);
    r = s.cli("ls hf://org/gated", "HF_TOKEN=hf_wrong_cli_secret");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains("HF_TOKEN") && !Catch::Contains("hf_wrong_cli_secret"));
    CHECK(s.hub.cdn_auth_refused() == 0);
}

TEST_CASE("ringsafe verify re-hashes a cached file against its blob's name; --no-verify reads a lying CDN's bytes") {
    cli_site s;
    REQUIRE(s.cli("load hf://org/cli --cache").status == 0);
    const auto bytes = build_file(tensors).bytes;
    const fs::path blob = s.cache / "models--org--cli" / "blobs" / sha256_hex(bytes);
    REQUIRE(read_file(blob) == bytes);
    CHECK(s.cli("verify hf://org/cli", "HF_HUB_OFFLINE=1").status == 0);
    auto flipped = bytes;
    flipped[bytes.size() - 3] ^= std::byte{0x10};  // in "norm"'s bytes
    write_file(blob, flipped);
    // ls reads the header alone (the cache hit is not hashed); verify hashes the blob.
    CHECK(s.cli("ls hf://org/cli", "HF_HUB_OFFLINE=1").status == 0);
    auto r = s.cli("verify hf://org/cli", "HF_HUB_OFFLINE=1");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains("ObjectChanged") && Catch::Contains(blob.string()) &&
                          Catch::Contains(sha256_hex(flipped)));

    // A CDN that serves other bytes under the same ETag after the first two requests.
    fault_server faults(s.tmp / "faults");
    const built_file big = build_file({{"w", "U8", {2'000'000}, 2'000'000}});  // past the first request's 256 KiB
    auto other = big.bytes;
    for (std::size_t k = big.data_start; k < other.size(); ++k) other[k] ^= std::byte{0x5A};
    s.hub.add_repo("org/lying", {{"model.safetensors", big.bytes}}, "main", std::string(40, 'c'));
    write_file(s.hub.file_of("org/lying", std::string(40, 'c'), "model.safetensors.other"), other);
    make_world_readable(s.hub.root());
    int round = 0;
    auto lie = [&] {
        s.hub.control("org/lying", "cdn", faults.base_url() + "/cdn?file={file}&fault=swap&other={file}.other&skip=2&id=cli" +
                                              std::to_string(++round));
    };
    const std::string small = " --connections 2 --chunk 64K";
    lie();
    r = s.cli("load hf://org/lying" + small);
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains("ObjectChanged") && Catch::Contains(sha256_hex(big.bytes)));
    lie();
    r = s.cli("load hf://org/lying --no-verify" + small);
    CHECK(r.status == 0);
    lie();
    r = s.cli("load hf://org/lying --no-verify --cache" + small);  // the cache checks whatever the flag says
    CHECK(r.status == 1);
    CHECK_FALSE(fs::exists(s.cache / "models--org--lying" / "snapshots"));
}
