// Reading a safetensors header through a source: the prefix, then the rest in pieces.
#include "read/load_header.hpp"

#include <algorithm>

#include "format/error_context.hpp"

namespace ringsafe::read {

header_stream::header_stream(const source& src, const parse_options& opts) : src_(src) {
    try {
        std::span<const std::byte> prefix = src.prefix();
        n_ = parse_length_prefix(prefix, src.size(), opts);
        parser_.emplace(n_, src.size(), opts);
        const std::size_t in_prefix =
            prefix.size() > 8 ? static_cast<std::size_t>(std::min<std::uint64_t>(prefix.size() - 8, n_)) : 0;
        more_ = parser_->feed({reinterpret_cast<const char*>(prefix.data()) + 8, in_prefix});
        have_ = in_prefix;
        next();
    } catch (const error& e) {
        header_read_failed(src, e);
    }
}

void header_stream::next() {
    len_ = static_cast<std::size_t>(std::min<std::uint64_t>(n_ - have_, header_piece_size));
    more_ = more_ && len_ > 0;
    if (more_ && buf_.size() < len_) buf_.resize(len_);  // once: later pieces are no larger
}

void header_stream::got() {
    try {
        more_ = parser_->feed({buf_.data(), len_});
        have_ += len_;
        next();
    } catch (const error& e) {
        header_read_failed(src_, e);
    }
}

header header_stream::finish() {
    try {
        return parser_->finish();
    } catch (const error& e) {
        header_read_failed(src_, e);
    }
}

void header_read_failed(const source& src, const error& e) { format::rethrow_with(e, src.name(), src.name() + ": "); }

header load_header(source& src, const parse_options& opts) {
    header_stream s(src, opts);
    while (s.more()) {
        try {
            src.read_exact(s.offset(), s.piece());
        } catch (const error& e) {
            header_read_failed(src, e);
        }
        s.got();
    }
    return s.finish();
}

}  // namespace ringsafe::read
