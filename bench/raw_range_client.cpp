#include "raw_range_client.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

namespace ringsafe::bench {
namespace {

int connect_loopback(std::uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect failed");
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

void send_all(int fd, const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
        if (n <= 0) throw std::runtime_error("send failed");
        off += static_cast<std::size_t>(n);
    }
}

// One range: header into a small buffer, the body straight into dst.
void fetch_one(int fd, const std::string& path, std::uint64_t first, std::uint64_t len, std::byte* dst) {
    send_all(fd, "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=" + std::to_string(first) + "-" +
                     std::to_string(first + len - 1) + "\r\n\r\n");
    char head[4096];
    std::size_t have = 0, end = std::string_view::npos;
    while (end == std::string_view::npos) {
        ssize_t n = ::recv(fd, head + have, sizeof head - have, 0);
        if (n <= 0) throw std::runtime_error("connection closed in the header");
        have += static_cast<std::size_t>(n);
        end = std::string_view(head, have).find("\r\n\r\n");
        if (end == std::string_view::npos && have == sizeof head) throw std::runtime_error("header too large");
    }
    if (std::string_view(head, have).substr(9, 3) != "206") throw std::runtime_error("expected 206");
    std::size_t early = std::min<std::uint64_t>(have - (end + 4), len);
    std::memcpy(dst, head + end + 4, early);
    std::uint64_t got = early;
    while (got < len) {
        ssize_t n = ::recv(fd, dst + got, std::min<std::uint64_t>(len - got, 1u << 30), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            throw std::runtime_error("connection closed in the body after " + std::to_string(got) + " of " + std::to_string(len) +
                                     " bytes: " + (n < 0 ? std::strerror(errno) : "EOF"));
        got += static_cast<std::uint64_t>(n);
    }
}

}  // namespace

void raw_range_fetch(std::uint16_t port, const std::string& path, std::uint64_t size, std::byte* dst,
                     unsigned connections, std::uint64_t chunk) {
    std::atomic<std::uint64_t> next{0};
    std::exception_ptr error;
    std::mutex m;
    std::vector<std::thread> threads;
    for (unsigned c = 0; c < connections; ++c)
        threads.emplace_back([&] {
            int fd = -1;
            try {
                fd = connect_loopback(port);
                for (;;) {
                    std::uint64_t off = next.fetch_add(chunk);
                    if (off >= size) break;
                    fetch_one(fd, path, off, std::min(chunk, size - off), dst + off);
                }
            } catch (...) {
                std::lock_guard lock(m);
                if (!error) error = std::current_exception();
            }
            if (fd >= 0) ::close(fd);
        });
    for (auto& t : threads) t.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace ringsafe::bench
