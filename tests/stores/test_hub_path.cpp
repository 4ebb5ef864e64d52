// hf:// URLs (internal: stores/hub/hub_path.hpp) as huggingface_hub 2.4's
// parse_hf_uri and hf_hub_url take them apart and spell them (the expected
// values are what those functions return for the same inputs).
#include <catch2/catch.hpp>

#include "ringsafe/error.hpp"
#include "stores/hub/hub_path.hpp"

using namespace ringsafe;
using namespace ringsafe::stores;

namespace {

std::string refused(const std::string& url) {
    try {
        parse_hub_url(url);
    } catch (const error& e) {
        CHECK(e.code() == errc::InvalidArgument);
        CHECK_THAT(e.what(), Catch::Contains(url));
        return e.what();
    }
    FAIL("accepted " << url);
    return {};
}

}  // namespace

TEST_CASE("hf:// URLs are taken apart as huggingface_hub's parse_hf_uri takes them") {
    struct want {
        const char* url;
        const char* type;
        const char* repo;
        const char* revision;
        const char* path;
    };
    const want cases[] = {
        {"hf://org/name", "model", "org/name", "", ""},
        {"hf://org/name/model.safetensors", "model", "org/name", "", "model.safetensors"},
        {"hf://datasets/org/ds@v1/train/x.safetensors", "dataset", "org/ds", "v1", "train/x.safetensors"},
        {"hf://org/name@refs/pr/3/sub/dir/m.safetensors", "model", "org/name", "refs/pr/3", "sub/dir/m.safetensors"},
        {"hf://org/name@refs%2Fpr%2F3/m.safetensors", "model", "org/name", "refs/pr/3", "m.safetensors"},
        {"hf://org/name@feature%2Ffoo/a.json", "model", "org/name", "feature/foo", "a.json"},
        {"hf://org/name@refs/convert/parquet-v2/x", "model", "org/name", "refs/convert/parquet-v2", "x"},
        {"hf://models/org/name@main", "model", "org/name", "main", ""},
        {"hf://spaces/o/s/app.py", "space", "o/s", "", "app.py"},
        {"hf://org/name/dir/file@1.txt", "model", "org/name", "", "dir/file@1.txt"},  // '@' in the path is literal
        {"hf://org/name@abc/", "model", "org/name", "abc", ""},
        {"hf://org/name/", "model", "org/name", "", ""},
        {"hf://Org-1/Name_2.x/a b.json", "model", "Org-1/Name_2.x", "", "a b.json"},
        {"HF://org/name", "model", "org/name", "", ""},  // the dispatcher takes schemes in any case
    };
    for (const want& w : cases) {
        INFO(w.url);
        const hub_path p = parse_hub_url(w.url);
        CHECK(p.type == w.type);
        CHECK(p.repo == w.repo);
        CHECK(p.revision == w.revision);
        CHECK(p.path == w.path);
    }
    CHECK(parse_hub_url("hf://org/name").revision_or_main() == "main");
}

TEST_CASE("malformed hf:// URLs are refused, naming the URL and what is wrong") {
    CHECK_THAT(refused("hf://name"), Catch::Contains("ORG/NAME"));
    CHECK_THAT(refused("hf://org/na--me"), Catch::Contains("'--' or '..'"));
    CHECK_THAT(refused("hf://org/name@"), Catch::Contains("empty revision"));
    CHECK_THAT(refused("hf://dataset/org/x"), Catch::Contains("plural"));
    CHECK_THAT(refused("hf://buckets/org/b/x"), Catch::Contains("buckets are not supported"));
    CHECK_THAT(refused("hf://org/-name"), Catch::Contains("'org/-name'"));
    CHECK_THAT(refused("hf://org/name.git"), Catch::Contains(".git"));
    refused("hf://org//name");
    refused("hf://");
    CHECK_THAT(refused("hf://org/name/a/../../../etc/passwd"), Catch::Contains("'..' segment"));
    CHECK_THAT(refused("hf://org/name/a//b"), Catch::Contains("empty segment"));
    CHECK_THAT(refused("hf://org/name@..%2F..%2Fx/m"), Catch::Contains("revision"));  // refs/REVISION stays in refs/
    refused("http://org/name");
}

TEST_CASE("resolve URLs quote the revision whole and the path but its slashes, as hf_hub_url does") {
    const std::string ep = "https://hub";
    auto resolve = [&](const char* url) {
        const hub_path p = parse_hub_url(url);
        return hub_resolve_url(ep, p, p.revision_or_main());
    };
    CHECK(resolve("hf://org/name/model.safetensors") == "https://hub/org/name/resolve/main/model.safetensors");
    CHECK(resolve("hf://datasets/org/ds@v1/train/x.safetensors") == "https://hub/datasets/org/ds/resolve/v1/train/x.safetensors");
    CHECK(resolve("hf://org/name@refs/pr/3/sub/dir/m.safetensors") ==
          "https://hub/org/name/resolve/refs%2Fpr%2F3/sub/dir/m.safetensors");
    CHECK(resolve("hf://org/name@feature%2Ffoo/a.json") == "https://hub/org/name/resolve/feature%2Ffoo/a.json");
    CHECK(resolve("hf://spaces/o/s/app.py") == "https://hub/spaces/o/s/resolve/main/app.py");
    CHECK(resolve("hf://org/name/dir/file@1.txt") == "https://hub/org/name/resolve/main/dir/file%401.txt");
    CHECK(resolve("hf://Org-1/Name_2.x/a b.json") == "https://hub/Org-1/Name_2.x/resolve/main/a%20b.json");
    // An endpoint with a path (a proxy) and a trailing slash.
    const hub_path p = parse_hub_url("hf://org/name/m.safetensors");
    CHECK(hub_resolve_url("http://127.0.0.1:8080/hf/", p, "main") == "http://127.0.0.1:8080/hf/org/name/resolve/main/m.safetensors");
}

TEST_CASE("a pinned hf:// URL names the commit, and parses back to the same file") {
    const std::string commit = "0123456789abcdef0123456789abcdef01234567";
    for (const char* url : {"hf://org/name/model.safetensors", "hf://datasets/org/ds@v1/train/x.safetensors",
                            "hf://org/name@refs/pr/3/sub/m.safetensors", "hf://spaces/o/s/a.json"}) {
        INFO(url);
        const hub_path p = parse_hub_url(url);
        const std::string pinned = hub_url(p, commit);
        CHECK_THAT(pinned, Catch::Contains("@" + commit + "/"));
        const hub_path back = parse_hub_url(pinned);
        CHECK(back.type == p.type);
        CHECK(back.repo == p.repo);
        CHECK(back.revision == commit);
        CHECK(back.path == p.path);
    }
    CHECK(hub_url(parse_hub_url("hf://org/name/m.safetensors"), commit) == "hf://org/name@" + commit + "/m.safetensors");
    CHECK(hub_url(parse_hub_url("hf://datasets/o/d/x"), commit) == "hf://datasets/o/d@" + commit + "/x");
    // A revision holding '/' (not a special ref) keeps its %2F, so that it parses back whole.
    const hub_path branch = parse_hub_url("hf://org/name@feature%2Ffoo/a.json");
    CHECK(hub_url(branch, branch.revision) == "hf://org/name@feature%2Ffoo/a.json");
    CHECK(parse_hub_url(hub_url(branch, branch.revision)).revision == "feature/foo");
    CHECK(hub_url(branch, "refs/pr/3") == "hf://org/name@refs/pr/3/a.json");
    // '%' too (found by fuzz_hub_url): "%66" in a revision must not come back as "f".
    const hub_path pct = parse_hub_url("hf://org/name@a%2566/x");
    CHECK(pct.revision == "a%66");
    CHECK(hub_url(pct, pct.revision) == "hf://org/name@a%2566/x");
    CHECK(parse_hub_url(hub_url(pct, pct.revision)).revision == "a%66");
    // A model whose ORG is a type's name keeps "models/" (found by fuzz_hub_url).
    const hub_path org = parse_hub_url("hf://models/model/s/f");
    CHECK(org.repo == "model/s");
    CHECK(hub_url(org, commit) == "hf://models/model/s@" + commit + "/f");
    CHECK(parse_hub_url(hub_url(parse_hub_url("hf://models/datasets/x"), commit)).type == "model");
}

TEST_CASE("cache folder names and commit ids as huggingface_hub writes them") {
    CHECK(hub_repo_folder(parse_hub_url("hf://org/name")) == "models--org--name");
    CHECK(hub_repo_folder(parse_hub_url("hf://datasets/org/ds/x")) == "datasets--org--ds");
    CHECK(hub_repo_folder(parse_hub_url("hf://spaces/o/s/x")) == "spaces--o--s");
    CHECK(is_commit_hash("0123456789abcdef0123456789abcdef01234567"));
    CHECK_FALSE(is_commit_hash("0123456789ABCDEF0123456789abcdef01234567"));  // upper case: a ref name
    CHECK_FALSE(is_commit_hash("0123456"));
    CHECK_FALSE(is_commit_hash("main"));
}
