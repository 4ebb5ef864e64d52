// A local file mapped into memory, made resident in parallel before use:
// mapped_file.
//
// The zero-copy way to load a local checkpoint: tensors are views of one
// private mapping of the file, so a file already in the page cache costs no
// copy and several processes loading it share its pages. Unlike a lazy
// mapping, populate() brings the selected ranges in up front, on several
// threads, with the kernel's readahead started for the parts not yet cached,
// so later accesses never fault on disk I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "ringsafe/plan.hpp"

namespace ringsafe {

// A byte range of a mapped file.
struct mapped_range {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
};

// A copy out of a mapped file: `length` bytes at file `offset` to `dst`.
struct mapped_copy {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::byte* dst = nullptr;
};

// What populate() and copy_to() found and did, for benchmarks and tests.
struct populate_stats {
    std::uint64_t bytes = 0;          // bytes of the ranges (overlaps counted once per range)
    std::uint64_t cold_bytes = 0;     // bytes that were not in the page cache before
    unsigned threads = 0;             // threads that worked on it
};

// The whole file, mapped private and writable: writes through the mapping are
// copy-on-write, stay in this process and never reach the file. The mapping
// keeps the file's pages even after the path is replaced (rename) or unlinked.
// Move-only; unmapped on destruction (callers keep it alive while views exist).
class mapped_file {
public:
    mapped_file() noexcept = default;
    // Opens and maps `path`. Throws ringsafe::error naming the path: a
    // system_category error (with error::path()) when it cannot be opened,
    // stat'ed or mapped, InvalidArgument when it is not a regular file.
    static mapped_file open(const std::string& path);
    ~mapped_file();
    mapped_file(mapped_file&& other) noexcept;
    mapped_file& operator=(mapped_file&& other) noexcept;
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;

    // First byte of the mapping (nullptr for an empty file) and the file's size.
    std::byte* data() const noexcept { return data_; }
    std::uint64_t size() const noexcept { return size_; }
    const std::string& path() const noexcept { return path_; }
    // The mapped file's identity when it was opened (st_dev, st_ino): compare
    // with shard_info's to know the mapping is the file a reader parsed.
    std::uint64_t device() const noexcept { return device_; }
    std::uint64_t inode() const noexcept { return inode_; }
    // Its last modification (st_mtim, in ns) when it was mapped: with size(),
    // compare with shard_info::mtime_ns to know it was not rewritten in place since.
    std::int64_t mtime_ns() const noexcept { return mtime_ns_; }

    // Makes every byte of `ranges` resident and mapped, on up to `threads`
    // threads (0: one per core, at least 8 when sampled chunks are not cached,
    // the calling thread alone for a cached total under 64 MiB), in 8 MiB
    // chunks: a cached chunk is mapped by one read per 64 KiB (the kernel's
    // fault-around maps the rest), after MADV_POPULATE_READ of its last page
    // checked that the file still covers it; a chunk not cached is read by
    // MADV_POPULATE_READ (its faults drive the kernel's readahead).
    // Small totals run on the calling thread. ctl.cancel is checked between
    // chunks (throws errc::Cancelled), ctl.on_progress gets bytes done.
    // Throws InvalidArgument for a range past the end, Truncated when the file
    // shrank under the mapping (naming the path and offset), system errors for I/O.
    populate_stats populate(std::span<const mapped_range> ranges, unsigned threads = 0,
                            const read_control& ctl = {}) const;
    // Copies each range of the file to its destination out of the mapping (the
    // copy's faults map the page cache's pages; from 256 KiB on with
    // non-temporal stores where the CPU has them), in 4 MiB pieces on up to
    // `threads` threads (0: one per core, at least 8 when sampled pieces are
    // not cached; the calling thread alone under 8 MiB). A piece not cached is
    // read in by MADV_POPULATE_READ first. Destinations must not overlap the
    // mapping or each other. Errors and ctl as populate().
    populate_stats copy_to(std::span<const mapped_copy> copies, unsigned threads = 0,
                           const read_control& ctl = {}) const;
    // Bytes of `range` the page cache holds now: cachestat(2) of the file when the
    // kernel has it and allows it (the file unreplaced at its path), else mincore.
    std::uint64_t resident_bytes(mapped_range range) const;
    // Asks the kernel to start reading `range` into the page cache and returns
    // (MADV_WILLNEED); no error if it declines.
    void will_need(mapped_range range) const noexcept;

private:
    std::byte* data_ = nullptr;
    std::uint64_t size_ = 0;
    std::string path_;
    std::uint64_t device_ = 0, inode_ = 0;
    std::int64_t mtime_ns_ = 0;
};

}  // namespace ringsafe
