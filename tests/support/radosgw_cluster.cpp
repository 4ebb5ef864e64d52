#include "radosgw_cluster.hpp"

#include <cstdlib>

#include "test_support.hpp"

namespace ringsafe::test {
namespace fs = std::filesystem;
namespace {

std::string quote(const fs::path& p) {
    std::string q = "'";  // appended piecewise: '+' chains trip g++ 12's -Wrestrict (GCC bug 105329)
    q.append(p.string()).append("'");
    return q;
}

}  // namespace

radosgw_cluster::radosgw_cluster(const fs::path& dir)
    : daemons_("radosgw", {"--dir=" + fs::absolute(dir).string(), std::string("--access-key=") + access_key,
                           std::string("--secret-key=") + secret_key, "--uid=ringsafe"}) {
    rgw_port_ = static_cast<std::uint16_t>(std::stoi(daemons_.field("port")));
}

int radosgw_cluster::create_bucket(const std::string& bucket) const {
    auto r = run_command("curl -s -o /dev/null -w '%{http_code}' -X PUT -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "
                         "--aws-sigv4 aws:amz:us-east-1:s3 --user " + std::string(access_key) + ":" + secret_key + " " +
                         endpoint() + "/" + bucket);
    return std::atoi(r.out.c_str());
}

int radosgw_cluster::put_object(const std::string& bucket, const std::string& key_encoded, const fs::path& file) const {
    auto r = run_command("curl -s -o /dev/null -w '%{http_code}' -T " + quote(file) +
                         " -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' --aws-sigv4 aws:amz:us-east-1:s3 --user " +
                         std::string(access_key) + ":" + secret_key + " '" + endpoint() + "/" + bucket + "/" + key_encoded + "'");
    return std::atoi(r.out.c_str());
}

}  // namespace ringsafe::test
