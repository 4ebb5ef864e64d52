// Reading a shard's header through a source: the prefix, then the rest (safetensors in
// pieces, GGUF guided by its parser's estimate).
#include "read/load_header.hpp"

#include <algorithm>
#include <cctype>

#include "format/error_context.hpp"

namespace ringsafe::read {

shard_header from_safetensors(header h) {
    shard_header s;
    s.format = file_format::safetensors;
    s.data_start = h.data_start();
    s.header_bytes = h.header_size;
    s.tensors = std::move(h.tensors);
    s.by_name = std::move(h.by_name);
    s.metadata = std::move(h.metadata);
    return s;
}

shard_header from_gguf(gguf::header h) {
    shard_header s;
    s.format = file_format::gguf;
    s.data_start = h.data_offset;
    s.header_bytes = h.data_offset;
    s.tensors = std::move(h.tensors);
    s.by_name = std::move(h.by_name);
    h.tensors.clear();
    h.by_name.clear();
    s.gguf = std::make_shared<const gguf::header>(std::move(h));
    return s;
}

namespace {

// Whether a source is read as GGUF: its magic says so; or it is named *.gguf
// and does not start like a safetensors file (a length within the file, then
// '{'), so that a damaged GGUF file gets GGUF's verdict (BadMagic, Truncated).
bool read_as_gguf(const source& src) {
    const std::span<const std::byte> prefix = src.prefix();
    if (gguf::is_gguf(prefix)) return true;
    std::string name = src.name().substr(0, is_url(src.name()) ? src.name().find_first_of("?#") : std::string::npos);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!name.ends_with(".gguf")) return false;
    if (prefix.size() < 9) return true;
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(prefix[static_cast<std::size_t>(i)]);
    std::size_t i = 8;
    while (i < prefix.size() && std::isspace(std::to_integer<unsigned char>(prefix[i]))) ++i;
    return n > src.size() - 8 || i == prefix.size() || prefix[i] != std::byte{'{'};
}

}  // namespace

header_stream::header_stream(const source& src, const parse_options& opts) : src_(src) {
    try {
        if (read_as_gguf(src)) {
            gguf_.emplace(src, opts);
            return;
        }
        const std::span<const std::byte> prefix = src.prefix();
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

read_op header_stream::op() noexcept {
    if (gguf_) return gguf_->op();
    return read_op{8 + have_, len_, reinterpret_cast<std::byte*>(buf_.data()), 0};
}

void header_stream::got() {
    try {
        if (gguf_) return gguf_->got();
        more_ = parser_->feed({buf_.data(), len_});
        have_ += len_;
        next();
    } catch (const error& e) {
        header_read_failed(src_, e);
    }
}

shard_header header_stream::finish() {
    try {
        if (gguf_) return from_gguf(gguf_->finish());
        return from_safetensors(parser_->finish());
    } catch (const error& e) {
        header_read_failed(src_, e);
    }
}

void header_read_failed(const source& src, const error& e) { format::rethrow_with(e, src.name(), src.name() + ": "); }

shard_header load_header(source& src, const parse_options& opts) {
    header_stream s(src, opts);
    while (s.more()) {
        const read_op op = s.op();
        try {
            if (op.one_request) src.execute({&op, 1}, {});
            else src.read_exact(op.offset, {op.dst, op.length});
        } catch (const error& e) {
            header_read_failed(src, e);
        }
        s.got();
    }
    return s.finish();
}

}  // namespace ringsafe::read
