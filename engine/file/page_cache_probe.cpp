// cached_fraction: cachestat(2), or RWF_NOWAIT probes where it is unavailable.
#include "file/page_cache_probe.hpp"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "file/cachestat.hpp"

namespace ringsafe::file {
namespace {

constexpr std::size_t max_samples = 32;

bool page_cached(int fd, std::uint64_t offset) {
    char byte;
    iovec iov{&byte, 1};
    for (;;) {
        const ssize_t n = ::preadv2(fd, &iov, 1, static_cast<off_t>(offset), RWF_NOWAIT);
        if (n < 0 && errno == EINTR) continue;
        return n == 1;
    }
}

// Calls fn(op) for every `step`-th non-empty op.
template <class Fn>
void for_samples(std::span<const read_op> ops, std::size_t step, Fn fn) {
    std::size_t k = 0;
    for (const auto& op : ops)
        if (op.length != 0 && k++ % step == 0) fn(op);
}

}  // namespace

double cached_fraction(int fd, std::span<const read_op> ops) noexcept {
    std::size_t nonempty = 0;
    for (const auto& op : ops) nonempty += op.length != 0;
    if (nonempty == 0) return 1;
    const long ps = ::sysconf(_SC_PAGESIZE);
    const std::uint64_t page = ps > 0 ? static_cast<std::uint64_t>(ps) : 4096;
    const std::size_t step = (nonempty + max_samples - 1) / max_samples;

    bool exact = true;
    double have = 0, want = 0;
    for_samples(ops, step, [&](const read_op& op) {
        if (!exact) return;
        const long long n = file::cached_pages(fd, op.offset, op.length);
        if (n < 0) {
            exact = false;
            return;
        }
        have += static_cast<double>(n);
        want += static_cast<double>((op.offset + op.length + page - 1) / page - op.offset / page);
    });
    if (exact) return want > 0 ? have / want : 1;

    unsigned hits = 0, probes = 0;
    for_samples(ops, step, [&](const read_op& op) {
        for (std::uint64_t at : {op.offset, op.offset + op.length / 2}) {
            ++probes;
            hits += page_cached(fd, at);
        }
    });
    return probes ? static_cast<double>(hits) / probes : 1;
}

}  // namespace ringsafe::file
