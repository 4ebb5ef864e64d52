// What of a mapped file is resident, and making it so (page_residency.hpp).
#include "file/page_residency.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "file/cachestat.hpp"
#include "ringsafe/error.hpp"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

namespace ringsafe::file {

bool looks_resident(std::byte* p, std::uint64_t n) {
    const std::uint64_t pages = (n + page_bytes - 1) / page_bytes;
    for (std::uint64_t k = 0; k < 5; ++k) {
        const std::uint64_t i = pages <= 1 ? 0 : (pages - 1) * k / 4;
        unsigned char v = 0;
        if (::mincore(p + i * page_bytes, page_bytes, &v) != 0 || !(v & 1)) return false;
    }
    return true;
}

void touch_pages(const std::byte* p, std::uint64_t n, std::uint64_t stride) {
    unsigned char sum = 0;
    for (std::uint64_t off = 0; off < n; off += stride) sum ^= *reinterpret_cast<const volatile unsigned char*>(p + off);
    static_cast<void>(sum);
}

bool populate_read(std::byte* p, std::uint64_t n, const std::string& path, std::uint64_t offset) {
    for (;;) {
        if (::madvise(p, n, MADV_POPULATE_READ) == 0) return true;
        if (errno == EINTR || errno == EAGAIN) continue;
        if (errno == EINVAL) return false;
        if (errno == EFAULT)
            raise(errc::Truncated, "cannot read " + path + " at offset " + std::to_string(offset) +
                                       ": the file is shorter than when it was mapped, or unreadable");
        raise_errno(errno, "cannot read " + path + " at offset " + std::to_string(offset), path);
    }
}

long long cached_pages_of(const std::string& path, std::uint64_t device, std::uint64_t inode,
                          std::span<const mapped_range> ranges) {
    // cachestat's cost grows with the page cache's folios, not the pages: far
    // below a mincore of the mapping for a large file (bench/README.md, "Mapped files").
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st {};
    long long out = -1;
    if (::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_dev) == device &&
        static_cast<std::uint64_t>(st.st_ino) == inode) {
        out = 0;
        for (const auto& r : ranges) {
            if (r.length == 0) continue;
            const long long n = cached_pages(fd, r.offset, r.length);
            if (n < 0) {
                out = -1;
                break;
            }
            out += n;
        }
    }
    ::close(fd);
    return out;
}

bool all_cached(const std::string& path, std::uint64_t device, std::uint64_t inode,
                std::span<const mapped_range> ranges) {
    std::vector<mapped_range> pages;
    std::uint64_t want = 0;
    for (const auto& r : ranges) {
        if (r.length == 0) continue;
        const std::uint64_t b = r.offset / page_bytes * page_bytes;
        const std::uint64_t e = (r.offset + r.length + page_bytes - 1) / page_bytes * page_bytes;
        pages.push_back({b, e - b});
        want += (e - b) / page_bytes;
    }
    if (want == 0) return true;
    const long long have = cached_pages_of(path, device, inode, pages);
    return have >= 0 && static_cast<std::uint64_t>(have) >= want;
}

}  // namespace ringsafe::file
