// Caller-side destination memory for reads: host_buffer.
//
// Why destination memory matters more than anything else here: a read from
// the page cache is a kernel memcpy into the caller's pages, and its speed is
// set by those pages:
//   - ordinary 4 KiB pages: every page costs TLB misses and the copy
//     routine's per-page setup;
//   - transparent huge pages (2 MiB): that cost once per 512 such pages;
//   - memory never touched before: a page fault and zeroing per page on top.
// (The README's "Destination memory" section has measured figures.)
// So a loader should read into huge-page-backed, prefaulted memory; that is
// what host_buffer gives by default. Huge pages need THP set to `madvise` or
// `always` (/sys/kernel/mm/transparent_hugepage/enabled); pages() reports
// what the kernel actually provided.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace ringsafe {

// Which pages back a host_buffer.
enum class page_kind {
    huge,            // 2 MiB alignment + MADV_HUGEPAGE (transparent huge pages)
    small,           // MADV_NOHUGEPAGE: ordinary 4 KiB pages even when THP = always
    system_default,  // no advice: whatever the system's THP policy gives
};

// How a host_buffer is allocated.
struct buffer_options {
    page_kind pages = page_kind::huge;
    // Touch every page now (MADV_POPULATE_WRITE, else one write per page) so
    // reads do not pay page faults; costs the faulting time up front.
    bool prefault = true;
};

// What backs a range of memory, from /proc/self/smaps (approximate when the
// kernel merged the mapping with a neighbouring one).
struct page_report {
    std::uint64_t size = 0;           // bytes asked about
    std::uint64_t resident = 0;       // Rss: bytes with a page behind them
    std::uint64_t huge = 0;           // AnonHugePages: bytes on 2 MiB pages
    // "THP" when at least 90 % of `size` is on huge pages, "4KiB" when none
    // is, "mixed(NN% THP)" otherwise, "untouched" when nothing is resident.
    std::string label() const;
};

// An owning, move-only block of anonymous memory (mmap), aligned to 2 MiB
// for page_kind::huge, else to 4096. Freed (munmap) on destruction. The
// memory starts zeroed.
class host_buffer {
public:
    host_buffer() noexcept = default;
    // Allocates `size` bytes (size 0 gives an empty buffer). Throws
    // ringsafe::error (system_category) when mmap fails.
    explicit host_buffer(std::size_t size, const buffer_options& opts = {});
    ~host_buffer();
    host_buffer(host_buffer&& other) noexcept;
    host_buffer& operator=(host_buffer&& other) noexcept;
    host_buffer(const host_buffer&) = delete;
    host_buffer& operator=(const host_buffer&) = delete;

    std::byte* data() noexcept { return data_; }
    const std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    // The whole buffer, or `length` bytes at `offset` (throws InvalidArgument
    // when the sub-range does not fit).
    std::span<std::byte> span() noexcept { return {data_, size_}; }
    std::span<std::byte> span(std::size_t offset, std::size_t length);
    // Touches every page now (see buffer_options::prefault).
    void prefault();
    // What the kernel backs this buffer with right now.
    page_report pages() const;

private:
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    std::size_t mapped_ = 0;  // bytes mapped at data_ (size rounded up)
};

// page_report for any address range of this process (e.g. a caller's own buffer).
page_report describe_pages(const void* addr, std::size_t size);

}  // namespace ringsafe
