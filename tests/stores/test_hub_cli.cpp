// The CLI on hf:// URLs, as a process, against the Hub stand-in: ls, verify,
// load, get and cp read them; --cache writes the Hub cache (a copy's two
// readers share each file's entry), which later runs read with no request and
// HF_HUB_OFFLINE=1 alone; HF_TOKEN opens a gated repo, its absence is named.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>

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
