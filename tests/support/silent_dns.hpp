// A name server that does not answer, for the tests of host-name resolution
// (asio_resolve, http_resolve), and a hosts file of a test's own (stores_azure_accounts).
//
// The server is real: a UDP socket on 127.53.x.y:53, named by a resolv.conf
// bind-mounted over /etc/resolv.conf in a mount namespace of the process's
// own (unshare(CLONE_NEWNS): root, as in CI). Nothing is sent anywhere but
// that loopback address: use_name_server checks that a new thread sees the
// mounted file before anything is resolved. Where the namespace, the mount or
// port 53 are not allowed, the process exits 77 (skipped). The namespace is
// entered before any thread starts, so such a test runs in a process of its own.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_support.hpp"

namespace ringsafe::test {

// Exits 77 (meson's "skipped") after printing why.
[[noreturn]] void skip_test(const std::string& why);

// A DNS server on a loopback address that keeps every query unanswered until
// release(), then answers each (those kept and those to come) with REFUSED.
class silent_dns {
public:
    silent_dns();  // bound, not serving yet (exits 77 where port 53 cannot be bound)
    ~silent_dns();
    silent_dns(const silent_dns&) = delete;
    silent_dns& operator=(const silent_dns&) = delete;

    const std::string& address() const { return address_; }
    // Starts serving (on a thread of its own).
    void start();
    // Queries received so far.
    unsigned queries() const { return queries_.load(); }
    // Answers the kept queries and every later one (REFUSED).
    void release();
    // Calls release() `limit` from now at the latest, on a thread of its own
    // that release() or the destructor ends: a test that would wait for the
    // answer ends too, and can tell by released() that it waited.
    void release_after(std::chrono::seconds limit);
    // Whether release() was called.
    bool released();

private:
    void serve();
    void refuse(std::vector<unsigned char> q, const sockaddr_in& to);

    int fd_ = -1, stop_ = -1;
    std::string address_;
    std::thread thread_;
    std::atomic<unsigned> queries_{0};
    std::mutex mutex_;
    std::condition_variable changed_;  // released_ or stopping_
    bool released_ = false;
    bool stopping_ = false;
    std::thread releaser_;
    std::vector<std::pair<std::vector<unsigned char>, sockaddr_in>> kept_;
};

// Points this process's /etc/resolv.conf (in a new mount namespace) at
// `server` with glibc's own timeout at `timeout_s` seconds (1..30) and one
// attempt, so that only the caller's deadline can end the wait first. Call it
// while this is the process's only thread; throws std::runtime_error if a new
// thread does not see the file (a query would leave the machine).
void use_name_server(const temp_dir& dir, const std::string& server, int timeout_s = 10);

// Points this process's /etc/hosts (in a new mount namespace) at a file that
// names each of `names` `address` and nothing else: host names a test serves
// on loopback (Azure's ACCOUNT.blob.core.windows.net) resolve there, with no
// query leaving the machine. The same rules as use_name_server.
void use_hosts_file(const temp_dir& dir, const std::vector<std::string>& names, const std::string& address = "127.0.0.1");

}  // namespace ringsafe::test
