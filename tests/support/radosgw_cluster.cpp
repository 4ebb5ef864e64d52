#include "radosgw_cluster.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "test_support.hpp"

namespace ringsafe::test {
namespace fs = std::filesystem;
namespace {

[[noreturn]] void skip(const std::string& why, const fs::path& dir) {
    std::fprintf(stderr, "skipped: %s (logs in %s)\n", why.c_str(), dir.c_str());
    std::exit(77);
}

std::string quote(const fs::path& p) {
    std::string q = "'";  // appended piecewise: '+' chains trip g++ 12's -Wrestrict (GCC bug 105329)
    q.append(p.string()).append("'");
    return q;
}

}  // namespace

radosgw_cluster::radosgw_cluster(const fs::path& dir) : dir_(dir) {
    for (const char* p : {"ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph", "curl"}) require_program(p);
    fs::create_directories(dir / "mon");
    fs::create_directories(dir / "osd");
    fs::create_directories(dir / "run");
    const std::uint16_t mon_port = free_port();
    rgw_port_ = free_port();
    const std::string d = fs::absolute(dir).string();
    const std::string fsid = run_command("cat /proc/sys/kernel/random/uuid").out.substr(0, 36);
    std::ofstream(dir / "ceph.conf")
        << "[global]\nfsid = " << fsid << "\nmon host = v2:127.0.0.1:" << mon_port << "\nmon initial members = a\n"
        << "auth cluster required = none\nauth service required = none\nauth client required = none\n"
        << "ms mon client mode = crc secure\n"  // without it radosgw never listens
        << "osd pool default size = 1\nosd pool default min size = 1\nosd pool default pg num = 8\n"
        << "osd pool default pgp num = 8\nosd pool default pg autoscale mode = off\nmon allow pool size one = true\n"
        << "mon warn on pool no redundancy = false\nosd crush chooseleaf type = 0\n"
        << "run dir = " << d << "/run\nlog file = " << d << "/$name.log\nadmin socket = " << d << "/run/$name.asok\n"
        << "mon data = " << d << "/mon\nosd data = " << d << "/osd\nosd objectstore = memstore\n"
        << "memstore device bytes = 1073741824\n"
        << "[client.rgw]\nrgw frontends = beast endpoint=127.0.0.1:" << rgw_port_ << "\n";
    const std::string conf = " -c " + quote(dir / "ceph.conf");
    auto step = [&](const std::string& cmd, const char* what) {
        if (run_command("timeout 60 " + cmd + " >>" + quote(dir / "setup.log") + " 2>&1").status != 0)
            skip(std::string("Ceph setup step failed: ") + what, dir);
    };
    step("monmaptool --create --addv a '[v2:127.0.0.1:" + std::to_string(mon_port) + "]' --fsid " + fsid + " " +
             quote(dir / "monmap"), "monmaptool");
    step("ceph-mon --mkfs -i a --monmap " + quote(dir / "monmap") + conf, "ceph-mon --mkfs");
    daemons_.emplace_back(std::vector<std::string>{"ceph-mon", "-i", "a", "-c", (dir / "ceph.conf").string(), "-f"}, dir / "mon.out");
    step("ceph" + conf + " --connect-timeout 30 osd create", "ceph osd create");
    step("ceph-osd -i 0 --mkfs" + conf, "ceph-osd --mkfs");
    daemons_.emplace_back(std::vector<std::string>{"ceph-osd", "-i", "0", "-c", (dir / "ceph.conf").string(), "-f"}, dir / "osd.out");
    daemons_.emplace_back(std::vector<std::string>{"radosgw", "-n", "client.rgw", "-c", (dir / "ceph.conf").string(), "-f"},
                          dir / "rgw.out");
    bool up = false;
    for (int i = 0; i < 120 && !up; ++i) {
        up = run_command("curl -s -o /dev/null -m 2 " + endpoint() + "/").status == 0;
        if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!up) skip("radosgw did not start listening", dir);
    step("radosgw-admin" + conf + " user create --uid=ringsafe --display-name=ringsafe --access-key=" + access_key +
             " --secret=" + secret_key, "radosgw-admin user create");
}

radosgw_cluster::~radosgw_cluster() {
    while (!daemons_.empty()) daemons_.pop_back();
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
