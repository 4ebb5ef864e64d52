// Every conformance file served by nginx gives the same `ringsafe verify --json`
// output (and exit status) as the local file, and `ringsafe ls` of a remote
// checkpoint whose header fits the prefetch takes exactly one request.
#include <catch2/catch.hpp>

#include <filesystem>

#include "http_harness.hpp"
#include "test_support.hpp"

using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (std::size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size()) s.replace(p, from.size(), to);
    return s;
}

}  // namespace

TEST_CASE("ringsafe verify --json over HTTP matches the local file for every conformance case") {
    const fs::path conf = conformance_dir();
    if (!fs::exists(conf)) {
        std::fprintf(stderr, "skipped: no conformance files at %s\n", conf.c_str());
        std::exit(77);
    }
    temp_dir tmp;
    fs::path root = tmp / "www";
    fs::create_directories(root);
    fs::copy(conf, root, fs::copy_options::recursive);
    nginx_server ng(tmp / "nginx", {root, "", "", nullptr, 1, 0});
    std::size_t files = 0;
    for (const char* group : {"valid", "invalid"}) {
        for (auto& e : fs::directory_iterator(root / group)) {
            if (e.path().extension() != ".safetensors") continue;
            ++files;
            const std::string local = e.path().string();
            const std::string url = ng.base_url() + "/" + group + "/" + e.path().filename().string();
            auto want = run_command("'" + cli_path() + "' verify --json '" + local + "' 2>/dev/null");
            auto got = run_command("'" + cli_path() + "' verify --json '" + url + "' 2>/dev/null");
            INFO(url);
            CHECK(got.status == want.status);
            CHECK(got.out == replace_all(want.out, local, url));
        }
    }
    CHECK(files > 100);

    // ls of a remote file whose header fits the first request: exactly one request.
    const auto before = ng.access_log().size();
    auto ls = run_command("'" + cli_path() + "' ls '" + ng.base_url() + "/valid/all_dtypes.safetensors' 2>&1");
    CHECK(ls.status == 0);
    CHECK(ng.access_log().size() == before + 1);
}
