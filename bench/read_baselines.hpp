// Baseline readers for bench_read: the same byte ranges into the same caller
// memory by other means (pread, mmap+memcpy, a minimal liburing loop,
// memcpy from RAM), plus fio and page-cache eviction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringsafe::bench {

// File bytes [offset, +length) into dst.
struct copy_range {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::byte* dst = nullptr;
};

// Each returns the seconds taken, opening the file included.
// pread() loop: `threads` threads share 4 MiB pieces through an atomic cursor.
double pread_loop(const std::string& path, const std::vector<copy_range>& ranges, unsigned threads);
// mmap() the file afresh, memcpy each range (threads share 4 MiB pieces), munmap.
double mmap_memcpy(const std::string& path, const std::vector<copy_range>& ranges, unsigned threads);
// One ring, 1 MiB reads, 32 in flight. O_DIRECT: reads the 4 KiB-aligned cover of
// each range (dst must be congruent to the file offset mod 4096 with 4 KiB of
// slack either side), READ_FIXED into the arena registered beforehand (not timed).
double uring_loop(const std::string& path, const std::vector<copy_range>& ranges, bool direct,
                  std::byte* arena, std::size_t arena_size);
// memcpy of the same bytes from `src` (a RAM copy of the data) with `threads` threads.
double memcpy_ranges(const std::byte* src, std::uint64_t src_base, const std::vector<copy_range>& ranges,
                     unsigned threads);

// posix_fadvise(DONTNEED) over the whole file (guest-cold for the next read).
void drop_cache(const std::string& path);

struct fio_result {
    bool ran = false;
    double gbps = 0;
    std::string what;  // the command line, or why it did not run
};
// Sequential fio read of the whole file, 1 MiB blocks, io_uring, depth 32.
// hot: --invalidate=0 with `jobs` jobs splitting the file; direct: --direct=1
// --nonvectored=1 --fixedbufs --registerfiles.
fio_result run_fio(const std::string& path, std::uint64_t size, bool direct, bool hot, unsigned jobs);

}  // namespace ringsafe::bench
