// az:// sources against the Azure Blob stand-in (tests/support/azure_blob_standin.py,
// which checks Shared Key and SAS signatures as the service does; the Python
// tests prove it agrees with azure-storage-blob): connection strings, Run:ai's
// variable names, SAS tokens, x-ms-version and If-Match on every request,
// credentials never sent to another host, hostile answers, the CLI.
// Exits 77 (skipped) when python3 is missing.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "checkpoint_bytes.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/open_source.hpp"
#include "stores/azure_object.hpp"
#include "stores/shared_key.hpp"
#include "store_servers.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

constexpr const char* blob_url = "az://models/dir/model file.bin";

struct blobs {
    temp_dir tmp;
    std::vector<std::byte> data = std::vector<std::byte>((3u << 20) + 55);
    fs::path root = tmp / "data";
    blobs() {
        fill_pattern(data, 9);
        fs::create_directories(root / "models" / "dir");
        fs::create_directories(root / "public" / "dir");
        write_file(root / "models" / "dir" / "model file.bin", data);
        write_file(root / "public" / "dir" / "model file.bin", data);
        write_file(root / "models" / "tiny.safetensors", build_file({{"w", "U8", {100000}, 100000}}).bytes);
    }
};

blobs& the_blobs() {
    static blobs b;
    return b;
}

std::string connection_string(const standin& s, const std::string& key = azure_dev_key) {
    return "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + key + ";BlobEndpoint=" + s.base_url() +
           "/devstoreaccount1;";
}

source_options options() { return store_test_options(); }

// An account SAS for devstoreaccount1 (read, blob service, objects), signed as Azure defines it.
std::string account_sas(const std::string& expiry) {
    const std::string sts = std::string(azure_dev_account) + "\nr\nb\no\n\n" + expiry + "\n\n\n2025-01-05\n\n";
    const std::string auth = stores::azure_shared_key_authorization(azure_dev_account, azure_dev_key, sts);
    return "sv=2025-01-05&ss=b&srt=o&sp=r&se=" + http::uri_encode(expiry, false) +
           "&sig=" + http::uri_encode(auth.substr(auth.find(':') + 1), false);
}

}  // namespace

TEST_CASE("az:// with a connection string (emulator path style): Shared Key, x-ms-version, If-Match") {
    auto& b = the_blobs();
    temp_dir t;
    standin s = azure_standin(b.root, {}, t.path());
    scoped_env e("AZURE_STORAGE_CONNECTION_STRING", connection_string(s));
    auto src = open_url(blob_url, options());
    CHECK(src->name() == blob_url);
    std::vector<std::byte> all(src->size());
    src->read_exact(0, all);
    CHECK(all == b.data);
    const auto log = s.log();
    const std::size_t gets = count_lines(log, {"\"GET\"", "/devstoreaccount1/models/dir/model%20file.bin"});
    CHECK(gets >= 13);
    CHECK(count_lines(log, {"\"authorization\": \"SharedKey\"", "\"x_ms_version\": \"2025-01-05\"", "\"status\": 206"}) == gets);
    CHECK(count_lines(log, {"\"if_match\": \"\\\"0x"}) == gets - 1);  // every request after the first
}

TEST_CASE("az:// with Run:ai's AZURE_STORAGE_ACCOUNT_NAME / AZURE_STORAGE_ACCOUNT_KEY and an explicit endpoint") {
    auto& b = the_blobs();
    temp_dir t;
    standin s = azure_standin(b.root, {}, t.path());
    scoped_env n("AZURE_STORAGE_ACCOUNT_NAME", azure_dev_account);
    scoped_env k("AZURE_STORAGE_ACCOUNT_KEY", azure_dev_key);
    source_options o = options();
    o.stores.azure.endpoint = s.base_url() + "/devstoreaccount1";
    CHECK(read_url(blob_url, o) == b.data);
    SECTION("a wrong key is HttpError 403 naming the URL, never the key") {
        std::string wrong = azure_dev_key;
        wrong[0] = wrong[0] == 'A' ? 'B' : 'A';
        o.stores.azure.key = wrong;
        const std::string m = kind_of([&] { open_url(blob_url, o); });
        CHECK_THAT(m, Catch::Contains("HttpError") && Catch::Contains("403") && Catch::Contains("/models/dir/model%20file.bin"));
        CHECK_THAT(m, !Catch::Contains(wrong.substr(0, 20)));
    }
}

TEST_CASE("az:// with a SAS token: appended as the query, never re-encoded, no Authorization") {
    auto& b = the_blobs();
    temp_dir t;
    standin s = azure_standin(b.root, {}, t.path());
    const std::string sas = account_sas("2099-01-01T00:00:00Z");
    source_options o = options();
    o.stores.azure.account = azure_dev_account;
    o.stores.azure.endpoint = s.base_url() + "/devstoreaccount1";
    scoped_env e("AZURE_STORAGE_SAS_TOKEN", "?" + sas);
    CHECK(read_url(blob_url, o) == b.data);
    const auto log = s.log();
    CHECK(count_lines(log, {"\"authorization\": \"SAS\"", "\"query\": \"" + sas + "\"", "\"status\": 206"}) == log.size());
    SECTION("an expired token is refused (403), naming the URL") {
        scoped_env x("AZURE_STORAGE_SAS_TOKEN", account_sas("2001-01-01T00:00:00Z"));
        CHECK_THAT(kind_of([&] { open_url(blob_url, o); }), Catch::Contains("HttpError") && Catch::Contains("403"));
    }
}

TEST_CASE("az:// anonymous: a public container reads, a private one does not") {
    auto& b = the_blobs();
    temp_dir t;
    standin s = azure_standin(b.root, {"--public", "public"}, t.path());
    source_options o = options();
    o.stores.azure.endpoint = s.base_url() + "/devstoreaccount1";
    o.stores.azure.anonymous = true;
    CHECK(read_url("az://public/dir/model file.bin", o) == b.data);
    CHECK(count_lines(s.log(), {"\"authorization\": \"none\"", "\"x_ms_version\": \"2025-01-05\""}) == s.log().size());
    CHECK_THAT(kind_of([&] { open_url(blob_url, o); }), Catch::Contains("HttpError") && Catch::Contains("404"));
}

TEST_CASE("az:// hostile answers: rewritten blob (If-Match 412), other ETag, wrong ranges and sizes, short bodies") {
    auto& b = the_blobs();
    temp_dir t;
    auto with_fault = [&](std::vector<std::string> args) {
        fs::path copy = t / ("data-" + std::to_string(args.size()) + args[1]);
        fs::create_directories(copy / "models" / "dir");
        write_file(copy / "models" / "dir" / "model file.bin", b.data);
        return azure_standin(copy, args, t.path());
    };
    auto read_from = [&](const standin& s) {
        source_options o = options();
        o.stores.azure.connection_string = connection_string(s);
        return read_url(blob_url, o);
    };
    SECTION("a blob rewritten mid-read fails If-Match: ObjectChanged") {
        standin s = with_fault({"--fault", "change"});
        CHECK_THAT(kind_of([&] { read_from(s); }), Catch::Contains("ObjectChanged") && Catch::Contains("412"));
    }
    SECTION("a 206 with another ETag (If-Match ignored) is ObjectChanged") {
        standin s = with_fault({"--fault", "etag"});
        CHECK_THAT(kind_of([&] { read_from(s); }), Catch::Contains("ObjectChanged") && Catch::Contains("ETag"));
    }
    SECTION("a shifted Content-Range is RangeNotSupported") {
        standin s = with_fault({"--fault", "badrange"});
        CHECK_THAT(kind_of([&] { read_from(s); }), Catch::Contains("RangeNotSupported"));
    }
    SECTION("a size that changes is RangeNotSupported naming both sizes") {
        standin s = with_fault({"--fault", "size"});
        CHECK_THAT(kind_of([&] { read_from(s); }), Catch::Contains("RangeNotSupported") && Catch::Contains("differs"));
    }
    SECTION("bodies cut short are resumed; every byte exact") {
        standin s = with_fault({"--fault", "short", "--fault-count", "3"});
        CHECK(read_from(s) == b.data);
    }
}

TEST_CASE("az:// Shared Key never follows a redirect to another host") {
    auto& b = the_blobs();
    temp_dir t;
    standin other = azure_standin(b.root, {"--public", "models"}, t.path());
    standin s = azure_standin(b.root, {"--fault", "redirect:" + other.base_url(), "--fault-after", "0"}, t.path());
    source_options o = options();
    o.stores.azure.connection_string = connection_string(s);
    CHECK(read_url(blob_url, o) == b.data);
    const auto seen = other.log();
    REQUIRE(seen.size() >= 13);
    CHECK(count_lines(seen, {"\"authorization\": \"none\""}) == seen.size());
    CHECK(count_lines(s.log(), {"\"authorization\": \"SharedKey\""}) == s.log().size());
}

TEST_CASE("cli: ringsafe verify, cp and ls read az:// with --endpoint-url and the environment's key") {
    auto& b = the_blobs();
    temp_dir t;
    standin s = azure_standin(b.root, {}, t.path());
    const std::string cli = cli_path();
    const std::string env = "AZURE_STORAGE_ACCOUNT=devstoreaccount1 AZURE_STORAGE_KEY='" + std::string(azure_dev_key) + "' ";
    const std::string ep = " --endpoint-url " + s.base_url() + "/devstoreaccount1 ";
    const auto local = run_command(cli + " verify '" + (b.root / "models" / "tiny.safetensors").string() + "' 2>&1");
    REQUIRE(local.status == 0);
    auto r = run_command(env + cli + " verify" + ep + "az://models/tiny.safetensors 2>&1");
    INFO(r.out);
    CHECK(r.status == 0);
    CHECK(r.out == local.out);  // the same tensors, hashed from the same bytes
    r = run_command(env + cli + " cp" + ep + "az://models/tiny.safetensors '" + (t / "out.safetensors").string() + "' 2>&1");
    INFO(r.out);
    REQUIRE(r.status == 0);
    const std::string hash_line = local.out.substr(local.out.find("\nw "), local.out.find('\n', local.out.find("\nw ") + 1) - local.out.find("\nw "));
    CHECK_THAT(run_command(cli + " verify '" + (t / "out.safetensors").string() + "' 2>&1").out, Catch::Contains(hash_line));
    r = run_command(env + cli + " ls" + ep + "az://models/missing.safetensors 2>&1");
    CHECK(r.status != 0);
    CHECK_THAT(r.out, Catch::Contains("az://models/missing.safetensors") && Catch::Contains("404"));
    CHECK_THAT(r.out, !Catch::Contains(std::string(azure_dev_key).substr(0, 16)));
}
