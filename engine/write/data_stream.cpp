// Sequential staged / zero-copy writing (data_stream.hpp).
#include "format/alignment.hpp"
#include "write/data_stream.hpp"

#include <fcntl.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "ringsafe/error.hpp"

namespace ringsafe::write {
namespace {
constexpr std::uint64_t owned_bit = std::uint64_t{1} << 63;
}

data_stream::data_stream(int fd, std::uint64_t start, const stream_config& cfg,
                         std::function<std::string(std::uint64_t)> describe)
    : cfg_(cfg), describe_(std::move(describe)), fd_(fd), pos_(start) {
    if (cfg_.block_size == 0 || cfg_.block_size % cfg_.align != 0)
        raise(errc::InvalidArgument, "writer block size must be a non-zero multiple of " +
                                         std::to_string(cfg_.align));
    if (cfg_.staging_blocks == 0) cfg_.staging_blocks = 1;
    if (cfg_.direct && start % cfg_.align != 0)
        raise(errc::InvalidArgument, "O_DIRECT data must start at an aligned offset");
    ring_ = std::make_unique<uring::write_ring>(
        fd, cfg_.depth, [this](std::uint64_t t, std::error_code ec, std::uint64_t off) { on_done(t, ec, off); });
}

data_stream::~data_stream() {
    ring_.reset();
    for (auto& b : blocks_) std::free(b.mem);
}

void data_stream::on_done(std::uint64_t token, std::error_code ec, std::uint64_t offset) {
    if (ec && !error_) {
        error_ = ec;
        error_offset_ = offset;
    }
    if (token & owned_bit) {
        held_.erase(token);
    } else {
        blocks_[token].fill = 0;
        free_.push_back(token);
    }
}

void data_stream::check() {
    if (!error_) return;
    std::string what = "writing " + (describe_ ? describe_(error_offset_) : std::string("data"));
    if (!cfg_.path.empty()) what += " to '" + cfg_.path + "'";
    what += " (file offset " + std::to_string(error_offset_) + ")";
    if (error_.category() == std::system_category()) raise_errno(error_.value(), what, cfg_.path);
    raise(error_, what + ": the write made no progress");
}

data_stream::block* data_stream::try_current() {
    if (cur_ < 0) {
        if (free_.empty() && blocks_.size() >= cfg_.staging_blocks) return nullptr;
        if (free_.empty()) {
            // 2 MiB-aligned and THP-advised: the copy into staging and the
            // kernel's pinning of it for O_DIRECT are both faster on huge pages.
            constexpr std::uint64_t huge = 2u << 20;
            bool big = cfg_.block_size % huge == 0;
            void* mem = std::aligned_alloc(big ? huge : cfg_.align, cfg_.block_size);
            if (!mem) raise_errno(ENOMEM, "allocating a writer staging block");
            if (big) ::madvise(mem, cfg_.block_size, MADV_HUGEPAGE);
            blocks_.push_back(block{static_cast<std::byte*>(mem)});
            free_.push_back(blocks_.size() - 1);
        }
        cur_ = static_cast<long>(free_.back());
        free_.pop_back();
        blocks_[cur_].file_off = pos_;
        blocks_[cur_].fill = 0;
    }
    return &blocks_[cur_];
}

void data_stream::reserve_space(std::uint64_t end) {
    if (!cfg_.direct || !cfg_.preallocate || end <= allocated_) return;
    std::uint64_t to = end + cfg_.preallocate;
    if (::fallocate(fd_, 0, static_cast<off_t>(allocated_), static_cast<off_t>(to - allocated_)) == 0)
        allocated_ = to;
    else
        cfg_.preallocate = 0;  // unsupported or no room: plain extending writes report what is really missing
}

void data_stream::submit_current(bool pad) {
    if (cur_ < 0) return;
    auto& b = blocks_[cur_];
    std::uint64_t len = b.fill;
    if (pad && cfg_.direct && len % cfg_.align) {
        std::uint64_t padded = format::align_up<std::uint64_t>(len, cfg_.align);
        std::memset(b.mem + len, 0, padded - len);
        len = padded;
    }
    auto token = static_cast<std::uint64_t>(cur_);
    cur_ = -1;
    if (len == 0) {
        free_.push_back(token);
        return;
    }
    reserve_space(b.file_off + len);
    // Never blocks: staging blocks bound what can queue behind the ring's depth.
    ring_->enqueue(b.file_off, b.mem, len, token);
    check();
}

std::size_t data_stream::put_copy_some(std::span<const std::byte> bytes) {
    check();
    std::size_t done = 0;
    while (done < bytes.size()) {
        block* b = try_current();
        if (!b) break;
        std::uint64_t n = std::min<std::uint64_t>(cfg_.block_size - b->fill, bytes.size() - done);
        std::memcpy(b->mem + b->fill, bytes.data() + done, n);
        b->fill += n;
        pos_ += n;
        staged_ += n;
        done += n;
        if (b->fill == cfg_.block_size) submit_current(false);
    }
    return done;
}

void data_stream::put_copy(std::span<const std::byte> bytes) {
    for (;;) {
        bytes = bytes.subspan(put_copy_some(bytes));
        if (bytes.empty()) return;
        ring_->wait_one();  // every staging block is in flight
        check();
    }
}

void data_stream::put_owned(std::span<const std::byte> bytes, std::shared_ptr<const void> keep) {
    check();
    if (bytes.size() < cfg_.min_zero_copy) return put_copy(bytes);
    if (cfg_.direct) {
        std::uint64_t head = (cfg_.align - pos_ % cfg_.align) % cfg_.align;
        auto addr = reinterpret_cast<std::uintptr_t>(bytes.data()) + head;
        if (head >= bytes.size() || addr % cfg_.align != 0) return put_copy(bytes);
        put_copy(bytes.first(head));  // now pos_ is aligned, so the open block is a whole number of sectors
        bytes = bytes.subspan(head);
    }
    submit_current(false);
    std::uint64_t middle = bytes.size();
    if (cfg_.direct) middle -= middle % cfg_.align;
    for (std::uint64_t done = 0; done < middle;) {
        std::uint64_t n = std::min(cfg_.block_size, middle - done);
        std::uint64_t token = owned_bit | next_owned_token_++;
        held_.emplace(token, keep);
        reserve_space(pos_ + n);
        ring_->submit(pos_, bytes.data() + done, n, token);
        check();
        pos_ += n;
        zero_copy_ += n;
        done += n;
    }
    put_copy(bytes.subspan(middle));
}

std::uint64_t data_stream::flush_start() {
    check();
    std::uint64_t end = pos_;
    if (cur_ >= 0) {
        auto& b = blocks_[cur_];
        end = b.file_off + (cfg_.direct ? format::align_up<std::uint64_t>(b.fill, cfg_.align) : b.fill);
    }
    submit_current(true);
    return end;
}

std::uint64_t data_stream::flush() {
    std::uint64_t end = flush_start();
    ring_->drain();
    check();
    return end;
}

}  // namespace ringsafe::write
