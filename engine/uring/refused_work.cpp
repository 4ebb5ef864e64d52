// The in-place read for work io-wq refused (see refused_work.hpp).
#include "uring/refused_work.hpp"

#include <unistd.h>

#include <cerrno>
#include <climits>

namespace ringsafe::uring {

int read_here(int fd, std::byte* buf, std::uint32_t len, std::uint64_t offset) noexcept {
    ssize_t n;
    do n = ::pread(fd, buf, len, static_cast<off_t>(offset));
    while (n < 0 && errno == EINTR);
    // pread returns at most 0x7ffff000 bytes, which fits an int.
    return n < 0 ? -errno : static_cast<int>(n > INT_MAX ? INT_MAX : n);
}

}  // namespace ringsafe::uring
