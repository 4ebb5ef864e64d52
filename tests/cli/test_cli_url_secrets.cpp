// The CLI never shows a URL's signing values: every command, given a presigned
// S3 URL (X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token) or an Azure
// SAS URL (sig=) of a file on nginx (which ignores the query), prints nothing
// of them when it succeeds, nor when the object is missing, with or without
// --json (get has none); the URL it names shows "..." in their place.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint_bytes.hpp"
#include "http_harness.hpp"

using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

std::string q(const fs::path& p) { return "'" + p.string() + "'"; }

// The signing values of both kinds of URL: none may appear in any output.
const std::vector<std::string> secrets = {"AKIAEXAMPLE", "SECRETSESSIONTOKEN", "f00dfeedc0ffee", "SASSIGNATURE"};
const std::string presigned_query =
    "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20250101%2Fus-east-1%2Fs3%2Faws4_request"
    "&X-Amz-Date=20250101T000000Z&X-Amz-Expires=900&X-Amz-Security-Token=SECRETSESSIONTOKEN"
    "&X-Amz-SignedHeaders=host&X-Amz-Signature=f00dfeedc0ffee";
const std::string sas_query = "?sv=2022-11-02&sr=b&sp=r&se=2030-01-01T00%3A00%3A00Z&sig=SASSIGNATURE";

void check_no_secret(const std::string& out) {
    for (const auto& s : secrets) CHECK_THAT(out, !Catch::Contains(s));
}

}  // namespace

TEST_CASE("no command shows the signing values of a presigned or SAS URL", "[cli][url]") {
    temp_dir tmp;
    const fs::path root = tmp / "www";
    fs::create_directories(root);
    const std::vector<tensor_spec> specs = {{"w", "F32", {8, 4}, 128}, {"b", "U8", {5}, 5}};
    write_file(root / "m.safetensors", build_file(specs).bytes);
    nginx_server ng(tmp / "nginx", {root, "", "", nullptr, 1, 0});
    for (const std::string& query : {presigned_query, sas_query}) {
        for (const std::string object : {"m.safetensors", "missing.safetensors"}) {
            const std::string url = ng.base_url() + "/" + object + query;
            const bool found = object == "m.safetensors";
            const std::vector<std::string> commands = {
                "ls '" + url + "'", "verify '" + url + "'", "load '" + url + "'",
                "get '" + url + "' w -o " + q(tmp / "got"), "cp '" + url + "' " + q(tmp / "out.safetensors")};
            for (const auto& cmd : commands) {
                for (const std::string json : {"", " --json"}) {
                    if (!json.empty() && cmd.rfind("get ", 0) == 0) continue;  // get has no --json
                    INFO(cmd + json);
                    const run_result r = run_command(cli_path() + " " + cmd + json + " 2>&1");
                    INFO(r.out);
                    CHECK(r.status == (found ? 0 : 1));
                    check_no_secret(r.out);
                    // A failure names the URL, its signing values as "...".
                    if (!found && json.empty()) {
                        CHECK_THAT(r.out, Catch::Contains(ng.base_url() + "/missing.safetensors?"));
                        CHECK_THAT(r.out, Catch::Contains("Signature=...") || Catch::Contains("sig=..."));
                    }
                }
                fs::remove_all(tmp / "got");
                fs::remove(tmp / "out.safetensors");
            }
        }
    }
}
