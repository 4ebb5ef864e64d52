// How a remote source splits a batch of read_ops into Range requests
// (pieces), shared by its blocking and its asynchronous executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>

#include "ringsafe/http.hpp"

namespace ringsafe::http {

// One request's worth of one op.
struct piece {
    std::size_t op_index;
    std::uint64_t offset, length;
    std::byte* dst;
};

// "tensor 'w' (bytes ..): " for an op, or "" without `describe`.
std::string op_label(const std::function<std::string(std::uint32_t)>& describe, const read_op& op);

// The largest request split_into_pieces makes of ops of `total` bytes (o resolved).
std::uint64_t piece_size(std::uint64_t total, const http_options& o);

// Splits `ops` into requests of at most o.chunk_size, of equal size across the
// connections (smaller when that would leave connections idle, or the last
// round of requests to a few of them); an op marked one_request stays one piece. Throws ringsafe::error(Truncated) naming the op, range and
// `name` when an op lies beyond `size` (before any request is made).
std::deque<piece> split_into_pieces(std::span<const read_op> ops, std::uint64_t size, const std::string& name,
                                    const http_options& o, const std::function<std::string(std::uint32_t)>& describe);

}  // namespace ringsafe::http
