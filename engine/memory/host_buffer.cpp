// host_buffer: aligned anonymous memory with huge-page advice and prefaulting.
#include "format/alignment.hpp"
#include "ringsafe/buffer.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <utility>

#include "ringsafe/error.hpp"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace ringsafe {
namespace {

constexpr std::size_t huge_page = 2u << 20;
constexpr std::size_t small_page = 4096;

}  // namespace

std::string page_report::label() const {
    if (resident == 0 && size > 0) return "untouched";
    if (huge == 0) return "4KiB";
    if (size > 0 && huge * 10 >= size * 9) return "THP";
    char buf[48];
    std::snprintf(buf, sizeof buf, "mixed(%d%% THP)", size ? static_cast<int>(huge * 100 / size) : 0);
    return buf;
}

host_buffer::host_buffer(std::size_t size, const buffer_options& opts) {
    if (size == 0) return;
    const std::size_t align = opts.pages == page_kind::huge ? huge_page : small_page;
    const std::size_t length = format::align_up(size, align);
    // Over-map by one alignment unit and trim, so the block starts on a 2 MiB boundary.
    const std::size_t span_len = align > small_page ? length + align : length;
    void* p = ::mmap(nullptr, span_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) raise_errno(errno, "host_buffer: mmap of " + std::to_string(size) + " bytes");
    auto base = reinterpret_cast<std::uintptr_t>(p);
    const std::uintptr_t start = format::align_up<std::uintptr_t>(base, align);
    if (start > base) ::munmap(p, start - base);
    const std::uintptr_t end = start + length;
    if (base + span_len > end) ::munmap(reinterpret_cast<void*>(end), base + span_len - end);

    data_ = reinterpret_cast<std::byte*>(start);
    size_ = size;
    mapped_ = length;
    if (opts.pages == page_kind::huge) ::madvise(data_, mapped_, MADV_HUGEPAGE);
    if (opts.pages == page_kind::small) ::madvise(data_, mapped_, MADV_NOHUGEPAGE);
    if (opts.prefault) prefault();
}

host_buffer::~host_buffer() {
    if (data_) ::munmap(data_, mapped_);
}

host_buffer::host_buffer(host_buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

host_buffer& host_buffer::operator=(host_buffer&& other) noexcept {
    if (this != &other) {
        if (data_) ::munmap(data_, mapped_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_ = std::exchange(other.mapped_, 0);
    }
    return *this;
}

std::span<std::byte> host_buffer::span(std::size_t offset, std::size_t length) {
    if (offset > size_ || length > size_ - offset)
        raise(errc::InvalidArgument, "host_buffer: range [" + std::to_string(offset) + ", +" +
                                         std::to_string(length) + ") exceeds its " +
                                         std::to_string(size_) + " bytes");
    return {data_ + offset, length};
}

void host_buffer::prefault() {
    if (!data_) return;
    if (::madvise(data_, mapped_, MADV_POPULATE_WRITE) == 0) return;
    // Older kernels: one write per page faults it in (the memory is zero, so writing zero keeps it).
    auto* p = reinterpret_cast<volatile unsigned char*>(data_);
    for (std::size_t i = 0; i < mapped_; i += small_page) p[i] = 0;
}

page_report host_buffer::pages() const { return describe_pages(data_, size_); }

page_report describe_pages(const void* addr, std::size_t size) {
    page_report r;
    r.size = size;
    if (!addr || size == 0) return r;
    const auto lo = reinterpret_cast<std::uintptr_t>(addr);
    const auto hi = lo + size;
    std::FILE* f = std::fopen("/proc/self/smaps", "r");
    if (!f) return r;
    char line[512];
    bool in_range = false;
    std::uint64_t vma_lo = 0, vma_hi = 0;
    while (std::fgets(line, sizeof line, f)) {
        std::uint64_t a = 0, b = 0;
        // A VMA header line starts with "start-end ".
        if (std::sscanf(line, "%" SCNx64 "-%" SCNx64 " ", &a, &b) == 2 && std::strchr(line, '-') < std::strchr(line, ' ')) {
            vma_lo = a, vma_hi = b;
            in_range = a < hi && b > lo;
            continue;
        }
        if (!in_range) continue;
        std::uint64_t kb = 0;
        // Scale VMA totals by the part of the VMA inside [lo, hi) (exact unless merged with a neighbour).
        const std::uint64_t overlap = std::min<std::uint64_t>(vma_hi, hi) - std::max<std::uint64_t>(vma_lo, lo);
        const double share = static_cast<double>(overlap) / static_cast<double>(vma_hi - vma_lo);
        if (std::sscanf(line, "Rss: %" SCNu64 " kB", &kb) == 1)
            r.resident += static_cast<std::uint64_t>(static_cast<double>(kb << 10) * share);
        else if (std::sscanf(line, "AnonHugePages: %" SCNu64 " kB", &kb) == 1)
            r.huge += static_cast<std::uint64_t>(static_cast<double>(kb << 10) * share);
    }
    std::fclose(f);
    r.resident = std::min<std::uint64_t>(r.resident, size);
    r.huge = std::min<std::uint64_t>(r.huge, size);
    return r;
}

}  // namespace ringsafe
