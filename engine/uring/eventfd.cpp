// open_eventfd, register_eventfd, consume_eventfd.
#include "uring/eventfd.hpp"

#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "ringsafe/error.hpp"

namespace ringsafe::uring {

int open_eventfd(const std::string& who) {
    const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd < 0) raise_errno(errno, who + ": eventfd");
    return fd;
}

void register_eventfd(io_uring& ring, int efd, const std::string& what) {
    const int r = io_uring_register_eventfd(&ring, efd);
    if (r < 0) raise_errno(-r, what);
}

void consume_eventfd(int efd) noexcept {
    std::uint64_t count;
    while (::read(efd, &count, sizeof count) < 0 && errno == EINTR) {
    }
}

}  // namespace ringsafe::uring
