// Reading a GGUF header through a source in few requests (engine-internal):
// the source's prefix is parsed first, then the rest is fetched in as few
// reads as the parser's estimate allows, each one request (read_op::one_request).
#pragma once

#include <cstdint>
#include <vector>

#include "ringsafe/gguf.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe::read {

// The end of the next read, given where the parse stands (`have` bytes
// parsed, `reads` reads made after the prefix) and the most the header may
// span: the parser's estimate plus the estimated rest again on the first read
// after the prefix (what follows the array the prefix ends in is not seen yet,
// and llama.cpp writes arrays of the vocabulary's size one after another:
// tokens, scores or types, merges), plus a quarter of it later; at least p.need.
std::uint64_t next_header_end(const gguf::progress& p, std::uint64_t have, unsigned reads, std::uint64_t limit) noexcept;

// The GGUF header of `src` in steps, so that the reads between them may be
// asynchronous: while more(), read op() (into this object's buffer) and call
// got(); then finish(). Parse errors are thrown as they are (the caller names
// the source).
class gguf_stream {
public:
    gguf_stream(const source& src, const parse_options& opts);
    bool more() const noexcept { return !done_; }
    read_op op() noexcept;
    void got();
    gguf::header finish() { return parser_.finish(); }

private:
    void advance(const gguf::progress& p);
    gguf::parser parser_;
    std::uint64_t limit_;             // min(source size, max_header_size)
    std::vector<std::byte> buf_;      // the file's bytes from 0 to have_
    std::uint64_t have_ = 0, target_ = 0;
    unsigned reads_ = 0;
    bool done_ = false;
};

}  // namespace ringsafe::read
