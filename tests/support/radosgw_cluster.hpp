// A throwaway Ceph cluster for S3 tests: one monitor, one memory-backed OSD
// (memstore), `auth none` inside the cluster, and radosgw on 127.0.0.1 with
// one S3 user, started by tests/support/server_launcher.py (radosgw), which
// the Python tests import. Starting takes ~15 s. All daemons are stopped by PID.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "http_harness.hpp"

namespace ringsafe::test {

class radosgw_cluster {
public:
    static constexpr const char* access_key = "RINGSAFETESTKEY";
    static constexpr const char* secret_key = "ringsafe-test-secret";

    // Starts everything under `dir`; returns once a signed request works; exits 77
    // (skipped) when the Ceph binaries (or python3, curl) are missing or the cluster does not come up.
    explicit radosgw_cluster(const std::filesystem::path& dir);
    // "http://127.0.0.1:<port>"
    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(rgw_port_); }
    // Creates a bucket / uploads a file with curl's SigV4 (returns the HTTP status).
    int create_bucket(const std::string& bucket) const;
    int put_object(const std::string& bucket, const std::string& key_encoded, const std::filesystem::path& file) const;

private:
    std::uint16_t rgw_port_ = 0;
    launched_servers daemons_;  // the launcher running mon, osd and rgw (it stops them in reverse order)
};

}  // namespace ringsafe::test
