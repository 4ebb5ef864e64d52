// Every conformance file served by nginx gives the same `ringsafe verify --json`
// output (and exit status) as the local file, and `ringsafe ls` of a remote
// checkpoint whose header fits the prefetch takes exactly one request.
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <thread>
#include <vector>

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
    struct job {
        std::string local, url;
        run_result want, got;
    };
    std::vector<job> jobs;
    for (const char* group : {"valid", "invalid"})
        for (auto& e : fs::directory_iterator(root / group))
            if (e.path().extension() == ".safetensors")
                jobs.push_back({e.path().string(), ng.base_url() + "/" + group + "/" + e.path().filename().string(), {}, {}});
    // Four CLI runs at a time: the suite stays fast.
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 4; ++t)
        pool.emplace_back([&] {
            for (std::size_t i; (i = next++) < jobs.size();) {
                jobs[i].want = run_command("'" + cli_path() + "' verify --json '" + jobs[i].local + "' 2>/dev/null");
                jobs[i].got = run_command("'" + cli_path() + "' verify --json '" + jobs[i].url + "' 2>/dev/null");
            }
        });
    for (auto& t : pool) t.join();
    for (auto& j : jobs) {
        INFO(j.url);
        CHECK(j.got.status == j.want.status);
        CHECK(j.got.out == replace_all(j.want.out, j.local, j.url));
    }
    const std::size_t files = jobs.size();
    CHECK(files > 100);

    // ls of a remote file whose header fits the first request: exactly one request.
    const auto before = ng.access_log().size();
    auto ls = run_command("'" + cli_path() + "' ls '" + ng.base_url() + "/valid/all_dtypes.safetensors' 2>&1");
    CHECK(ls.status == 0);
    CHECK(ng.access_log(before + 1).size() == before + 1);
}

TEST_CASE("ringsafe get and load take URLs; HF_TOKEN reaches the Hub (HF_ENDPOINT) only") {
    temp_dir tmp;
    fs::path root = tmp / "www";
    fs::create_directories(root / "private");
    const fs::path local = conformance_dir() / "valid" / "all_dtypes.safetensors";
    if (!fs::exists(local)) std::exit(77);
    fs::copy(local, root / "private" / "m.safetensors");
    std::string conf = "    location /private/ { if ($http_authorization != 'Bearer hf_test') { return 401; } }\n";
    nginx_server ng(tmp / "nginx", {root, conf, "", nullptr, 1, 0});
    const std::string url = ng.base_url() + "/private/m.safetensors";
    const std::string cli = "'" + cli_path() + "'";

    auto denied = run_command("env -u HF_TOKEN " + cli + " verify --json '" + url + "' 2>&1");
    CHECK(denied.status == 1);
    CHECK(denied.out.find("401") != std::string::npos);
    // HF_TOKEN is not sent to hosts that are not the Hub.
    auto other = run_command("HF_TOKEN=hf_test env -u HF_ENDPOINT " + cli + " verify '" + url + "' 2>&1");
    CHECK(other.status == 1);
    const std::string hub = "HF_TOKEN=hf_test HF_ENDPOINT=" + ng.base_url() + " ";
    auto want = run_command(cli + " verify --json '" + local.string() + "'");
    auto got = run_command(hub + cli + " verify --json '" + url + "'");
    CHECK(got.status == 0);
    CHECK(got.out == want.out);

    auto a = run_command(cli + " get '" + local.string() + "' t_u64 t_f64 -o '" + (tmp / "a").string() + "' 2>&1");
    auto b = run_command(hub + cli + " get '" + url + "' t_u64 t_f64 -o '" + (tmp / "b").string() + "' 2>&1");
    REQUIRE(a.status == 0);
    REQUIRE(b.status == 0);
    CHECK(read_file(tmp / "a" / "t_u64.npy") == read_file(tmp / "b" / "t_u64.npy"));
    CHECK(read_file(tmp / "a" / "t_f64.npy") == read_file(tmp / "b" / "t_f64.npy"));
    auto load = run_command(hub + cli + " load --json '" + url + "' 2>&1");
    CHECK(load.status == 0);
    CHECK(load.out.find("\"bytes\":480") != std::string::npos);
}
