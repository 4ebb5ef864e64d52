#include "silent_dns.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ringsafe::test {

void skip_test(const std::string& why) {
    std::fprintf(stderr, "skipped: %s\n", why.c_str());
    std::exit(77);
}

silent_dns::silent_dns() {
    stop_ = ::eventfd(0, EFD_CLOEXEC);
    fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || stop_ < 0) skip_test("no UDP socket");
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
        if (errno == EACCES || errno == EPERM) skip_test("binding UDP port 53 needs root");
    }
    skip_test("no free loopback address for the DNS server");
}

silent_dns::~silent_dns() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (releaser_.joinable()) releaser_.join();
    const std::uint64_t one = 1;
    (void)!::write(stop_, &one, sizeof one);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
    ::close(stop_);
}

void silent_dns::start() { thread_ = std::thread([this] { serve(); }); }

void silent_dns::release() {
    {
        std::lock_guard lock(mutex_);
        released_ = true;
        for (auto& [q, from] : kept_) refuse(q, from);
        kept_.clear();
    }
    changed_.notify_all();
}

void silent_dns::release_after(std::chrono::seconds limit) {
    releaser_ = std::thread([this, limit] {
        {
            std::unique_lock lock(mutex_);
            if (changed_.wait_for(lock, limit, [this] { return released_ || stopping_; })) return;
        }
        release();
    });
}

bool silent_dns::released() {
    std::lock_guard lock(mutex_);
    return released_;
}

void silent_dns::serve() {
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
void silent_dns::refuse(std::vector<unsigned char> q, const sockaddr_in& to) {
    q[2] |= 0x80;
    q[3] = static_cast<unsigned char>((q[3] & 0xf0) | 5);
    ::sendto(fd_, q.data(), q.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to);
}

namespace {
std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}
}  // namespace

namespace {

// Mounts `text` (written as dir/NAME) over /etc/NAME in this process's own mount
// namespace, and checks that a new thread reads it there.
void bind_over_etc(const temp_dir& dir, const std::string& name, const std::string& text) {
    if (::unshare(CLONE_NEWNS) != 0) skip_test("no mount namespace (unshare: " + std::string(std::strerror(errno)) + ")");
    if (::mount(nullptr, "/", "none", MS_REC | MS_PRIVATE, nullptr) != 0) skip_test("cannot make / private");
    write_file(dir / name, text);
    const std::string etc = "/etc/" + name;
    // An earlier call in this process left its (since deleted) file mounted there:
    // a mount over it fails with ENOENT, so take the earlier ones away first.
    while (::umount2(etc.c_str(), MNT_DETACH) == 0) {
    }
    if (::mount((dir / name).c_str(), etc.c_str(), "none", MS_BIND, nullptr) != 0) skip_test("cannot bind-mount " + etc);
    std::string seen;
    std::thread([&] { seen = slurp(etc); }).join();
    if (seen != text) throw std::runtime_error("a new thread does not see the mounted " + etc + ": not resolving anything");
}

}  // namespace

void use_name_server(const temp_dir& dir, const std::string& server, int timeout_s) {
    bind_over_etc(dir, "resolv.conf",
                  "nameserver " + server + "\noptions timeout:" + std::to_string(timeout_s) + " attempts:1\n");
}

void use_hosts_file(const temp_dir& dir, const std::vector<std::string>& names, const std::string& address) {
    std::string text = address;
    for (const std::string& n : names) text += " " + n;
    bind_over_etc(dir, "hosts", text + "\n");
}

}  // namespace ringsafe::test
