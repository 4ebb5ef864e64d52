#include "http/fetch_pieces.hpp"

#include <algorithm>

#include "ringsafe/error.hpp"

namespace ringsafe::http {

std::string op_label(const std::function<std::string(std::uint32_t)>& describe, const read_op& op) {
    return describe ? describe(op.tag) + ": " : std::string();
}

std::uint64_t piece_size(std::uint64_t total, const http_options& o) {
    // Rounds of requests each connection makes at chunk_size; then the piece
    // size that cuts the bytes into connections x rounds equal requests, so
    // that the connections finish together (a lone last round of a few
    // chunk_size requests would leave the others idle). Never below 256 KiB
    // (or chunk_size): small reads do not fan out into tiny requests.
    const std::uint64_t n = o.connections_per_origin, c = o.chunk_size;
    const std::uint64_t rounds = std::max<std::uint64_t>(1, (total + n * c - 1) / (n * c));
    const std::uint64_t even = (total + n * rounds - 1) / (n * rounds);
    return std::max<std::uint64_t>({even, std::min<std::uint64_t>(c, 256u << 10), 1});
}

std::deque<piece> split_into_pieces(std::span<const read_op> ops, std::uint64_t size, const std::string& name,
                                    const http_options& o, const std::function<std::string(std::uint32_t)>& describe) {
    std::deque<piece> work;
    std::uint64_t total = 0;
    for (const auto& op : ops) total += op.length;
    const std::uint64_t chunk = piece_size(total, o);
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const auto& op = ops[i];
        if (op.offset > size || op.length > size - op.offset)
            raise(errc::Truncated, op_label(describe, op) + "bytes " + std::to_string(op.offset) + "+" +
                                       std::to_string(op.length) + " lie beyond the end of " + name + " (" +
                                       std::to_string(size) + " bytes)");
        const std::uint64_t each = op.one_request ? std::max<std::uint64_t>(op.length, 1) : chunk;
        for (std::uint64_t at = 0; at < op.length; at += each)
            work.push_back({i, op.offset + at, std::min(each, op.length - at), op.dst + at});
    }
    return work;
}

}  // namespace ringsafe::http
