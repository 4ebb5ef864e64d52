// `ringsafe cp` from URLs through the built CLI: byte-exact copies from a real
// nginx (a file and a sharded index), and SIGINT in the middle of a copy from
// the rate-limited fault server leaving nothing at OUT.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "http_harness.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"
#include "test_support.hpp"
#include "written_file.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

using tensor_list = std::vector<std::pair<std::string, std::vector<std::byte>>>;

// A checkpoint at `p`: `count` tensors of awkward sizes, `big` bytes for every third.
tensor_list make_checkpoint(const fs::path& p, int count, std::uint64_t big, int seed) {
    tensor_list tensors;
    writer_options o;
    o.sync = o.sync_dir = false;
    writer w(p.string(), o);
    for (int i = 0; i < count; ++i) {
        std::uint64_t n = i % 5 == 4 ? 0 : i % 3 == 0 ? big + 7 * i : 1000 * i + 1;
        std::string name = "s" + std::to_string(seed) + ".t" + std::to_string(i);
        tensors.emplace_back(name, pattern(n, 900 + seed * 100 + i));
        w.add(name, dtype::U8, {n}, tensors.back().second);
    }
    w.finish(metadata_map{{"format", "pt"}});
    return tensors;
}

void check_copy(const fs::path& out, const tensor_list& tensors) {
    written_file f(out);
    REQUIRE(f.hdr.tensors.size() == tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        CHECK(f.hdr.tensors[i].name == tensors[i].first);
        CHECK(f.tensor(tensors[i].first) == tensors[i].second);
    }
    CHECK(reader::open(out.string()).tensors().size() == tensors.size());
}

}  // namespace

TEST_CASE("cp from nginx: a file and a sharded index, byte-exact, through small pipelines") {
    temp_dir tmp;
    fs::path root = tmp / "www";
    fs::create_directories(root);
    auto tensors = make_checkpoint(root / "model.safetensors", 30, (2u << 20) + 5, 1);
    auto shard1 = make_checkpoint(root / "model-00001-of-00002.safetensors", 7, 3u << 20, 2);
    auto shard2 = make_checkpoint(root / "model-00002-of-00002.safetensors", 6, 1u << 20, 3);
    {
        std::string map;
        for (auto* sh : {&shard1, &shard2})
            for (auto& [name, bytes] : *sh)
                map += (map.empty() ? "\"" : ",\"") + name + "\":\"model-0000" + (sh == &shard1 ? "1" : "2") +
                       "-of-00002.safetensors\"";
        write_file(root / "model.safetensors.index.json", "{\"weight_map\":{" + map + "}}");
    }
    nginx_server ng(tmp / "nginx", {root, "", "", nullptr, 1, 0});
    const std::string base = ng.base_url() + "/";
    for (std::string opts : {"--buffer 1M --buffers 2", "--buffer 3M --buffers 5", ""}) {
        INFO(opts);
        auto out = tmp / "out.safetensors";
        auto r = run_command(cli_path() + " cp " + base + "model.safetensors " + q(out) + " --no-sync --json " + opts +
                             " 2>&1");
        INFO(r.out);
        REQUIRE(r.status == 0);
        if (!opts.empty()) CHECK_THAT(r.out, Catch::Contains("\"readers\":2"));  // several batches: two readers
        check_copy(out, tensors);
        fs::remove(out);

        r = run_command(cli_path() + " cp " + base + "model.safetensors.index.json " + q(out) + " --no-sync " + opts +
                        " 2>&1");
        INFO(r.out);
        REQUIRE(r.status == 0);
        tensor_list both = shard1;
        both.insert(both.end(), shard2.begin(), shard2.end());
        check_copy(out, both);
        fs::remove(out);
    }
    // A missing object: exit 1 naming the URL, nothing at OUT.
    auto r = run_command(cli_path() + " cp " + base + "missing.safetensors " + q(tmp / "x.safetensors") + " 2>&1");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains(base + "missing.safetensors"));
    CHECK_FALSE(fs::exists(tmp / "x.safetensors"));
}

TEST_CASE("cp stopped by SIGINT or SIGTERM in the middle of a copy leaves nothing at OUT") {
    temp_dir tmp;
    fs::create_directories(tmp / "out");
    auto src = tmp / "src.safetensors";
    make_checkpoint(src, 12, 4u << 20, 4);  // ~16 MiB
    fault_server fs_(tmp / "logs");
    for (int sig : {SIGINT, SIGTERM}) {
        INFO("signal " << sig);
        const std::string id = "cp" + std::to_string(sig);
        // 1 MB/s per response: the copy takes seconds, the signal comes after the first data bytes.
        const std::string url = fs_.base_url() + "/m?file=" + src.string() + "&rate=1000000&id=" + id;
        auto out = tmp / "out" / "copy.safetensors";
        pid_t pid = ::fork();
        if (pid == 0) {
            ::execl(cli_path().c_str(), "ringsafe", "cp", url.c_str(), out.c_str(), "--buffer", "1M", "--buffers", "2",
                    static_cast<char*>(nullptr));
            ::_exit(127);
        }
        // Wait until the server has sent more than the three opening requests' prefixes (3 x 256 KiB).
        for (int i = 0; i < 400; ++i) {
            auto st = run_command("curl -s '" + fs_.base_url() + "/stats?id=" + id + "'");
            auto at = st.out.find("bytes ");
            if (at != std::string::npos && std::stoull(st.out.substr(at + 6)) > (1u << 20)) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(25));
        }
        ::kill(pid, sig);
        int status = 0;
        ::waitpid(pid, &status, 0);
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 128 + sig);
        CHECK(dir_entries(tmp / "out").empty());  // neither OUT nor a temporary
    }
}
