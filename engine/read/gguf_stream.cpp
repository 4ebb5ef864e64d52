// A GGUF header through a source: the prefix, then reads sized by the parser's estimate.
#include "read/gguf_stream.hpp"

#include <algorithm>
#include <cstring>

namespace ringsafe::read {

std::uint64_t next_header_end(const gguf::progress& p, std::uint64_t have, unsigned reads, std::uint64_t limit) noexcept {
    const std::uint64_t rest = p.estimate > have ? p.estimate - have : 0;
    const std::uint64_t extra = reads == 0 ? rest : rest / 4;
    const std::uint64_t want = p.estimate > limit - std::min(limit, extra) ? limit : p.estimate + extra;
    return std::max(p.need, std::min(want, limit));
}

gguf_stream::gguf_stream(const source& src, const parse_options& opts)
    : parser_(src.size(), opts), limit_(std::min(src.size(), opts.max_header_size)) {
    const std::span<const std::byte> prefix = src.prefix();
    buf_.assign(prefix.begin(), prefix.end());
    have_ = buf_.size();
    advance(parser_.feed(buf_));
}

void gguf_stream::advance(const gguf::progress& p) {
    done_ = p.done;
    if (done_) {
        buf_ = {};
        return;
    }
    target_ = next_header_end(p, have_, reads_, limit_);
    buf_.resize(static_cast<std::size_t>(target_));
}

read_op gguf_stream::op() noexcept {
    read_op op;
    op.offset = have_;
    op.length = target_ - have_;
    op.dst = buf_.data() + have_;
    op.one_request = true;
    return op;
}

void gguf_stream::got() {
    have_ = target_;
    ++reads_;
    advance(parser_.feed(buf_));
}

}  // namespace ringsafe::read
