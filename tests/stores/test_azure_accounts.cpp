// Azure credentials go only to the account they name (engine/stores/README.md,
// "az://"): every source of a key or SAS (azure_options, a connection string
// given or in $AZURE_STORAGE_CONNECTION_STRING, the AZURE_STORAGE_* variables
// and Run:ai's names) against a URL of another account. Two Azure Blob
// stand-ins on loopback play the two accounts, named ACCOUNT.blob.core.windows.net
// through a hosts file of this process's own (tests/support/silent_dns.hpp:
// a mount namespace, root; exits 77 where not allowed): the other account's
// server must see neither `sig=` nor Authorization, while the account the
// credential names does get it (the credential is not simply lost).
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "http/url.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "silent_dns.hpp"
#include "stores/azure_object.hpp"
#include "stores/shared_key.hpp"
#include "store_servers.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

constexpr const char* own_host = "devstoreaccount1.blob.core.windows.net";  // the credentials' account
constexpr const char* other_host = "attacker.blob.core.windows.net";        // someone else's
const char* const azure_vars[] = {"AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_ACCOUNT_NAME",
                                  "AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY", "AZURE_STORAGE_SAS_TOKEN"};

// An account SAS for devstoreaccount1 (read, blob service, objects), signed as Azure defines it.
std::string account_sas() {
    const std::string expiry = "2099-01-01T00:00:00Z";
    const std::string sts = std::string(azure_dev_account) + "\nr\nb\no\n\n" + expiry + "\n\n\n2025-01-05\n\n";
    const std::string auth = stores::azure_shared_key_authorization(azure_dev_account, azure_dev_key, sts);
    return "sv=2025-01-05&ss=b&srt=o&sp=r&se=" + http::uri_encode(expiry, false) +
           "&sig=" + http::uri_encode(auth.substr(auth.find(':') + 1), false);
}

// The two accounts' servers (the same blobs: the other one could serve them too).
struct accounts {
    temp_dir tmp;
    fs::path data = tmp / "data";
    std::vector<std::byte> blob = std::vector<std::byte>(300'000);
    std::optional<standin> own, other;
    accounts() {
        static const bool hosts = [] {  // once, while this is the process's only thread
            static temp_dir etc;
            use_hosts_file(etc, {own_host, other_host});
            return true;
        }();
        (void)hosts;
        fill_pattern(blob, 4);
        fs::create_directories(data / "models");
        write_file(data / "models" / "m.bin", blob);
        fs::create_directories(tmp / "own");
        fs::create_directories(tmp / "other");
        own.emplace(azure_standin(data, {}, tmp / "own"));
        other.emplace(azure_standin(data, {}, tmp / "other"));
    }
    static std::string port_of(const standin& s) { return s.base_url().substr(s.base_url().rfind(':') + 1); }
    // The blob endpoint of each account, by its host name (path style, as the stand-in serves).
    std::string own_endpoint() const { return "http://" + std::string(own_host) + ":" + port_of(*own) + "/devstoreaccount1"; }
    std::string other_endpoint() const { return "http://" + std::string(other_host) + ":" + port_of(*other) + "/devstoreaccount1"; }
    std::string own_url() const { return own_endpoint() + "/models/m.bin"; }
    std::string other_url() const { return other_endpoint() + "/models/m.bin"; }
};

// Requests of `s` that carried a credential: a SAS in the query, or Authorization.
std::size_t credentialed(const standin& s) {
    std::size_t n = 0;
    for (const std::string& l : s.log())
        if (l.find("sig=") != std::string::npos || l.find("\"authorization\": \"none\"") == std::string::npos) ++n;
    return n;
}

// Opens `url` (its read may fail: the other account's server refuses anonymous requests).
void open_ignoring_errors(const std::string& url, const source_options& o) {
    try {
        (void)read_url(url, o);
    } catch (const error& e) {
        UNSCOPED_INFO(url << ": " << e.what());
    }
}

struct credential_source {
    std::string what;
    std::vector<std::pair<std::string, std::string>> env;  // variables set
    azure_options options;
    bool https_own = true;  // whether it names an account, so that the own account's https URL gets it
};

std::vector<credential_source> sources(const accounts& a) {
    const std::string sas = account_sas(), key = azure_dev_key, own = a.own_endpoint();
    std::vector<credential_source> v;
    v.push_back({"AZURE_STORAGE_CONNECTION_STRING: BlobEndpoint + SharedAccessSignature (the portal's SAS string)",
                 {{"AZURE_STORAGE_CONNECTION_STRING", "BlobEndpoint=" + own + "/;SharedAccessSignature=" + sas}}, {}});
    v.push_back({"AZURE_STORAGE_CONNECTION_STRING: AccountName + SharedAccessSignature",
                 {{"AZURE_STORAGE_CONNECTION_STRING", "AccountName=devstoreaccount1;SharedAccessSignature=" + sas}}, {}});
    v.push_back({"AZURE_STORAGE_CONNECTION_STRING: AccountName + AccountKey + BlobEndpoint",
                 {{"AZURE_STORAGE_CONNECTION_STRING",
                   "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + key + ";BlobEndpoint=" + own}},
                 {}});
    v.push_back({"AZURE_STORAGE_ACCOUNT + AZURE_STORAGE_KEY",
                 {{"AZURE_STORAGE_ACCOUNT", "devstoreaccount1"}, {"AZURE_STORAGE_KEY", key}}, {}});
    v.push_back({"AZURE_STORAGE_ACCOUNT_NAME + AZURE_STORAGE_ACCOUNT_KEY (Run:ai's)",
                 {{"AZURE_STORAGE_ACCOUNT_NAME", "devstoreaccount1"}, {"AZURE_STORAGE_ACCOUNT_KEY", key}}, {}});
    v.push_back({"AZURE_STORAGE_ACCOUNT + AZURE_STORAGE_SAS_TOKEN",
                 {{"AZURE_STORAGE_ACCOUNT", "devstoreaccount1"}, {"AZURE_STORAGE_SAS_TOKEN", "?" + sas}}, {}});
    v.push_back({"AZURE_STORAGE_SAS_TOKEN alone (names no account)", {{"AZURE_STORAGE_SAS_TOKEN", sas}}, {}, false});
    v.push_back({"AZURE_STORAGE_KEY without an account variable, AccountName in the connection string",
                 {{"AZURE_STORAGE_CONNECTION_STRING", "AccountName=devstoreaccount1"}, {"AZURE_STORAGE_KEY", key}}, {}, false});
    credential_source opt{"azure_options: account + key", {}, {}};
    opt.options.account = "devstoreaccount1";
    opt.options.key = key;
    v.push_back(opt);
    credential_source opt_sas{"azure_options: sas_token alone (names no account)", {}, {}, false};
    opt_sas.options.sas_token = sas;
    v.push_back(opt_sas);
    credential_source opt_conn{"azure_options: connection_string with BlobEndpoint + SharedAccessSignature", {}, {}};
    opt_conn.options.connection_string = "BlobEndpoint=" + own + ";SharedAccessSignature=" + sas;
    v.push_back(opt_conn);
    return v;
}

// While it lives: `c`'s variables set, every other Azure variable unset, and the options with `c`'s.
struct in_environment_of {
    std::vector<std::unique_ptr<scoped_env>> env;
    source_options options = store_test_options();
    explicit in_environment_of(const credential_source& c) {
        for (const char* v : azure_vars) env.push_back(std::make_unique<scoped_env>(v, std::nullopt));
        for (auto& [k, v] : c.env) env.push_back(std::make_unique<scoped_env>(k, v));
        options.stores.azure = c.options;
    }
};

}  // namespace

TEST_CASE("azure accounts: no credential source reaches an https URL of another account") {
    accounts a;
    for (const credential_source& c : sources(a)) {
        INFO(c.what);
        const in_environment_of with(c);
        source_options o = with.options;
        const std::size_t other_before = a.other->log().size(), own_before = credentialed(*a.own);
        open_ignoring_errors(a.other_url(), o);
        // It was asked (the stand-in logs a request after answering it).
        CHECK(eventually([&] { return a.other->log().size() > other_before; }, std::chrono::seconds(10)));
        CHECK(credentialed(*a.other) == 0);  // with no sig= and no Authorization
        if (c.https_own) {  // the account it names gets it
            CHECK(read_url(a.own_url(), o) == a.blob);
            CHECK(eventually([&] { return credentialed(*a.own) > own_before; }, std::chrono::seconds(10)));
        } else {  // names no account: an explicit URL of any account goes without it
            const std::size_t asked = a.own->log().size();
            open_ignoring_errors(a.own_url(), o);
            CHECK(eventually([&] { return a.own->log().size() > asked; }, std::chrono::seconds(10)));
            CHECK(credentialed(*a.own) == own_before);
        }
    }
}

TEST_CASE("azure accounts: az:// of settings naming another account gets no credential of this one") {
    accounts a;
    for (const credential_source& c : sources(a)) {
        // The caller's settings name the other account (its name and endpoint); a credential
        // naming devstoreaccount1 (in the environment or a connection string) must not go there.
        // (One naming no account is these settings' own, and one in the options names theirs.)
        if (!c.https_own || !c.options.key.empty() || !c.options.sas_token.empty()) continue;
        INFO(c.what);
        const in_environment_of with(c);
        source_options o = with.options;
        o.stores.azure.account = "attacker";
        o.stores.azure.endpoint = a.other_endpoint();
        const std::size_t before = a.other->log().size();
        open_ignoring_errors("az://models/m.bin", o);
        CHECK(eventually([&] { return a.other->log().size() > before; }, std::chrono::seconds(10)));
        CHECK(credentialed(*a.other) == 0);
    }
    // A credential naming no account serves az:// of the settings it came with.
    scoped_env sas("AZURE_STORAGE_SAS_TOKEN", account_sas());
    source_options o = store_test_options();
    o.stores.azure.endpoint = a.own_endpoint();
    o.stores.azure.account = "devstoreaccount1";
    const std::size_t before = credentialed(*a.own);
    CHECK(read_url("az://models/m.bin", o) == a.blob);
    CHECK(eventually([&] { return credentialed(*a.own) > before; }, std::chrono::seconds(10)));
}
