// cached_pages: the cachestat(2) system call, which libc does not wrap.
#include "file/cachestat.hpp"

#include <sys/syscall.h>
#include <unistd.h>

namespace ringsafe::file {
namespace {

// cachestat(2) arrived in Linux 6.5 with the same number on every
// architecture that uses the common syscall table; older headers lack it.
#if defined(__NR_cachestat)
constexpr long cachestat_nr = __NR_cachestat;
#elif defined(__x86_64__) || defined(__aarch64__) || defined(__riscv)
constexpr long cachestat_nr = 451;
#else
constexpr long cachestat_nr = -1;
#endif

struct cachestat_range {
    std::uint64_t off, len;
};
struct cachestat_result {
    std::uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

}  // namespace

long long cached_pages(int fd, std::uint64_t offset, std::uint64_t length) noexcept {
    if (cachestat_nr < 0) return -1;
    cachestat_range r{offset, length};
    cachestat_result c{};
    if (::syscall(cachestat_nr, fd, &r, &c, 0) != 0) return -1;  // ENOSYS, EPERM (not our file), ...
    return static_cast<long long>(c.nr_cache);
}

}  // namespace ringsafe::file
