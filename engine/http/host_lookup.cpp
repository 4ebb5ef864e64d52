#include "http/host_lookup.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <netdb.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "http/connection.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::http {

namespace {

namespace net = boost::asio;
using net::ip::tcp;

// What the lookup thread and its waiting coroutines share. The thread owns a
// reference until getaddrinfo returns, so the state (and `done_fd`, which
// only the thread writes) outlives any waiter that gave up. Once written,
// `done_fd` stays readable: every waiter polls it, none reads it.
struct lookup {
    lookup(std::string h, std::string s, int fd) : host(std::move(h)), service(std::move(s)), done_fd(fd) {}
    ~lookup() { ::close(done_fd); }
    lookup(const lookup&) = delete;
    lookup& operator=(const lookup&) = delete;

    const std::string host, service;
    const int done_fd;  // eventfd, written once the answer is in
    std::mutex m;       // the answer:
    bool done = false;
    std::string failure;  // empty on success
    std::vector<tcp::endpoint> endpoints;
};

// Runs on the detached thread: resolves, records the answer, signals.
void run_lookup(const std::shared_ptr<lookup>& l) noexcept {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(l->host.c_str(), l->service.c_str(), &hints, &found);
    const int err = errno;
    std::string failure;
    std::vector<tcp::endpoint> endpoints;
    try {
        if (rc != 0) {
            failure = rc == EAI_SYSTEM ? std::string(std::strerror(err)) : std::string(::gai_strerror(rc));
        } else {
            for (const addrinfo* a = found; a; a = a->ai_next) {
                if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || a->ai_addrlen > sizeof(sockaddr_storage))
                    continue;
                tcp::endpoint ep;
                std::memcpy(ep.data(), a->ai_addr, a->ai_addrlen);
                ep.resize(a->ai_addrlen);
                endpoints.push_back(ep);
            }
            if (endpoints.empty()) failure = "no IPv4 or IPv6 address";
        }
    } catch (...) {  // out of memory
        failure = "out of memory";
        endpoints.clear();
    }
    if (found) ::freeaddrinfo(found);
    {
        std::lock_guard lock(l->m);
        l->done = true;
        l->failure = std::move(failure);
        l->endpoints = std::move(endpoints);
    }
    const std::uint64_t one = 1;
    (void)!::write(l->done_fd, &one, sizeof one);
}

// Lookups in progress, by "host:port", so that the connections a read opens at
// once (32 by default) share one getaddrinfo and one thread instead of asking
// the name server 32 times. Only lookups still in progress are joined: an
// answer is not kept past its lookup. Never destroyed (a lookup thread may
// outlive main); fork() leaves the child an empty table and a usable mutex
// (a lookup thread does not exist in the child).
struct in_progress {
    std::mutex m;
    std::map<std::string, std::weak_ptr<lookup>> by_key;
};

in_progress& lookups() {
    static in_progress* table = [] {
        auto* t = new in_progress;
        ::pthread_atfork([] { lookups().m.lock(); }, [] { lookups().m.unlock(); },
                         [] {
                             auto& l = lookups();
                             l.m.unlock();
                             l.by_key.clear();
                         });
        return t;
    }();
    return *table;
}

// The lookup in progress for `host`:`service`, or a new one with its thread started.
std::shared_ptr<lookup> join_or_start(const std::string& host, const std::string& service, const std::string& where) {
    auto& table = lookups();
    const std::string key = host + ":" + service;
    std::lock_guard lock(table.m);
    for (auto it = table.by_key.begin(); it != table.by_key.end();)
        it = it->second.expired() ? table.by_key.erase(it) : std::next(it);
    if (auto it = table.by_key.find(key); it != table.by_key.end())
        if (auto l = it->second.lock()) {
            std::lock_guard answer(l->m);
            if (!l->done) return l;
        }
    const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) raise_errno(errno, "resolving the host of " + where + ": eventfd");
    auto l = std::make_shared<lookup>(host, service, fd);
    try {
        std::thread([l] { run_lookup(l); }).detach();
    } catch (const std::system_error& e) {
        raise(errc::HttpError, "cannot resolve host of " + where + ": no thread for the lookup (" + e.what() + ")");
    }
    table.by_key[key] = l;
    return l;
}

// The waiter's side, shared with its handlers on the coroutine's executor
// (which may run after the coroutine stopped waiting).
struct waiter {
    explicit waiter(const net::any_io_executor& ex) : wake(ex), signal(ex) {}
    net::steady_timer wake;              // expires at the deadline; cancelled when the answer is in
    net::posix::stream_descriptor signal;  // a duplicate of the lookup's eventfd
};

}  // namespace

net::awaitable<std::vector<tcp::endpoint>> resolve_host(const url& target, std::chrono::milliseconds timeout,
                                                       detail::abandon_list* abandon) {
    const std::string where = target.shown();  // the URL, whose host it is
    const auto here = co_await net::this_coro::executor;
    auto l = join_or_start(target.host, std::to_string(target.port), where);
    auto w = std::make_shared<waiter>(here);
    const int mine = ::fcntl(l->done_fd, F_DUPFD_CLOEXEC, 0);
    if (mine < 0) raise_errno(errno, "resolving the host of " + where + ": dup of an eventfd");
    boost::system::error_code assigned;
    w->signal.assign(mine, assigned);
    if (assigned) {
        ::close(mine);
        raise(errc::HttpError, "cannot resolve host of " + where + ": " + assigned.message());
    }
    w->wake.expires_after(timeout);
    // Readable once the answer is in; polled, not read, so every waiter of the lookup wakes.
    w->signal.async_wait(net::posix::stream_descriptor::wait_read,
                         [w](const boost::system::error_code&) { w->wake.cancel(); });
    {
        const detail::abandon_list::entry waiting(abandon, [w] {
            boost::system::error_code ignored;
            w->signal.cancel(ignored);
            w->wake.cancel();
        });
        boost::system::error_code waited;
        co_await w->wake.async_wait(net::redirect_error(net::use_awaitable, waited));
    }
    boost::system::error_code ignored;
    w->signal.cancel(ignored);  // its handler, if still pending, completes now (and drops w)
    if (abandon && abandon->abandoned()) throw transport_failure("resolving " + where + " was abandoned");
    std::lock_guard lock(l->m);
    if (!l->done)
        raise(errc::HttpError, "resolving the host of " + where + " timed out after " + std::to_string(timeout.count()) +
                                   " ms (http_options::connect_timeout)");
    if (!l->failure.empty()) raise(errc::HttpError, "cannot resolve host of " + where + ": " + l->failure);
    co_return l->endpoints;  // a copy: every waiter of a shared lookup gets them
}

}  // namespace ringsafe::http
