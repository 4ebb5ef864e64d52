// Host-name resolution of an async_open against a DNS server that never
// answers: the open fails after http_options::connect_timeout with HttpError
// naming the host, instead of waiting for the system resolver.
//
// The server is real: a UDP socket on 127.53.x.y:53, named by a resolv.conf
// bind-mounted over /etc/resolv.conf in a mount namespace of this process's
// own (unshare(CLONE_NEWNS): root, as in CI). Nothing is sent anywhere but
// that loopback address: the test checks that a new thread (as the
// resolver's is) sees the mounted file before anything is resolved. Exits 77
// (skipped) where the namespace or the mount or port 53 are not allowed. The
// namespace is entered before any thread starts, so the test runs in a
// process of its own (meson test asio_resolve).
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "ringsafe/asio.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace net = boost::asio;
namespace ra = ringsafe::asio;

namespace {

[[noreturn]] void skip(const std::string& why) {
    std::fprintf(stderr, "skipped: %s\n", why.c_str());
    std::exit(77);
}

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// A DNS server on a loopback address that keeps every query unanswered until
// release(), then answers each (those kept and those to come) with REFUSED.
class silent_dns {
public:
    silent_dns() {
        stop_ = ::eventfd(0, EFD_CLOEXEC);
        fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd_ < 0 || stop_ < 0) skip("no UDP socket");
        // An address of its own per process (concurrent test runs), in 127.53.0.0/16.
        const unsigned p = static_cast<unsigned>(::getpid());
        for (unsigned i = 0; i < 64; ++i) {
            const unsigned n = (p + i * 7919) % 64000;
            address_ = "127.53." + std::to_string(n / 250 + 1) + "." + std::to_string(n % 250 + 1);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_port = htons(53);
            ::inet_pton(AF_INET, address_.c_str(), &a.sin_addr);
            if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return;
            if (errno == EACCES || errno == EPERM) skip("binding UDP port 53 needs root");
        }
        skip("no free loopback address for the DNS server");
    }
    ~silent_dns() {
        const std::uint64_t one = 1;
        (void)!::write(stop_, &one, sizeof one);
        if (thread_.joinable()) thread_.join();
        ::close(fd_);
        ::close(stop_);
    }
    const std::string& address() const { return address_; }
    // Starts serving (on a thread of its own).
    void start() { thread_ = std::thread([this] { serve(); }); }
    unsigned queries() const { return queries_.load(); }
    void release() {
        std::lock_guard lock(mutex_);
        released_ = true;
        for (auto& [q, from] : kept_) refuse(q, from);
        kept_.clear();
    }

private:
    void serve() {
        for (;;) {
            pollfd p[2] = {{fd_, POLLIN, 0}, {stop_, POLLIN, 0}};
            if (::poll(p, 2, -1) < 0) continue;
            if (p[1].revents) return;
            std::vector<unsigned char> q(512);
            sockaddr_in from{};
            socklen_t len = sizeof from;
            const ssize_t n = ::recvfrom(fd_, q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&from), &len);
            if (n < 12) continue;
            q.resize(static_cast<std::size_t>(n));
            ++queries_;
            std::lock_guard lock(mutex_);
            if (released_)
                refuse(q, from);
            else
                kept_.emplace_back(std::move(q), from);
        }
    }
    // The query echoed as a response (QR set) with RCODE 5, REFUSED.
    void refuse(std::vector<unsigned char> q, const sockaddr_in& to) {
        q[2] |= 0x80;
        q[3] = static_cast<unsigned char>((q[3] & 0xf0) | 5);
        ::sendto(fd_, q.data(), q.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
    }

    int fd_ = -1, stop_ = -1;
    std::string address_;
    std::thread thread_;
    std::atomic<unsigned> queries_{0};
    std::mutex mutex_;
    bool released_ = false;
    std::vector<std::pair<std::vector<unsigned char>, sockaddr_in>> kept_;
};

// Points this thread's (and its future threads') /etc/resolv.conf at `server`;
// call it while this is the process's only thread.
void use_name_server(const temp_dir& dir, const std::string& server) {
    if (::unshare(CLONE_NEWNS) != 0) skip("no mount namespace (unshare: " + std::string(std::strerror(errno)) + ")");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) skip("cannot make / private");
    // glibc's own timeout (10 s) far beyond the open's connect_timeout: only
    // the open's deadline can end the wait first.
    const std::string conf = "nameserver " + server + "\noptions timeout:10 attempts:1\n";
    write_file(dir / "resolv.conf", conf);
    if (::mount((dir / "resolv.conf").c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr) != 0)
        skip("cannot bind-mount /etc/resolv.conf");
    std::string seen;
    std::thread([&] { seen = slurp("/etc/resolv.conf"); }).join();
    REQUIRE(seen == conf);  // else nothing is resolved: the query would leave the machine
}

}  // namespace

TEST_CASE("asio resolve: a name server that never answers fails the open after connect_timeout",
          "[asio_resolve]") {
    temp_dir dir;
    silent_dns dns;
    use_name_server(dir, dns.address());  // before any thread
    dns.start();
    const std::string url = "http://ringsafe-resolve-test.invalid:9/m.safetensors";
    reader_options ro;
    ro.source.http.connect_timeout = std::chrono::milliseconds(200);
    net::io_context io;
    status st;
    ra::error_code got;
    int calls = 0;
    unsigned asked_before_handler = 0;
    ra::async_open(io.get_executor(), url, ro, st, [&](ra::error_code ec, ra::async_reader r) {
        ++calls;
        got = ec;
        asked_before_handler = dns.queries();
        CHECK_FALSE(r.valid());
        dns.release();  // lets the abandoned getaddrinfo return, and io.run() with it
    });
    io.run();
    REQUIRE(calls == 1);
    CHECK(asked_before_handler >= 1);  // the resolver did ask this server, which never answered
    CHECK(got == make_error_code(errc::HttpError));
    CHECK(st.code == make_error_code(errc::HttpError));
    CHECK_THAT(st.message, Catch::Contains("ringsafe-resolve-test.invalid") && Catch::Contains("timed out") &&
                               Catch::Contains("connect_timeout"));
}
