// Reading a shard's header through a source, whichever its format: the
// format is told by the magic bytes of the source's prefix (GGUF), else it is
// safetensors (the name matters only for a file that starts as neither: named
// *.gguf, it gets GGUF's verdict). Both become a shard_header, the records
// the reader keeps.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "read/gguf_stream.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/gguf.hpp"
#include "ringsafe/header.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe::read {

// One shard's parsed header as the reader keeps it: the tensor records (data
// order, offsets relative to data_start) and what else its format has.
struct shard_header {
    file_format format = file_format::safetensors;
    std::vector<tensor_info> tensors;
    std::vector<std::uint32_t> by_name;      // tensor indices sorted by name
    std::uint64_t data_start = 0;            // source offset of the data section
    std::uint64_t header_bytes = 0;          // safetensors: N; GGUF: data_start
    std::optional<metadata_map> metadata;    // safetensors' __metadata__
    std::shared_ptr<const gguf::header> gguf;  // GGUF: the rest of its header (its tensors moved out)
};
shard_header from_safetensors(header h);
shard_header from_gguf(gguf::header h);

// Reads and parses the header from the source's prefix and further reads:
// safetensors in pieces of at most header_piece_size, each parsed as it
// arrives, so a huge header is never held whole; GGUF in as few reads as its
// parser's estimate allows (gguf_stream). Errors are the parsers', with the
// source's name in front.
shard_header load_header(source& src, const parse_options& opts);

inline constexpr std::size_t header_piece_size = 4u << 20;

// load_header in steps, so that the reads between them may be asynchronous
// (async_open): while more(), read op() (op().one_request: as one request)
// and call got(); then finish(). Errors of every step and of the reads
// (passed to header_read_failed) are named as load_header() names them.
class header_stream {
public:
    header_stream(const source& src, const parse_options& opts);
    bool more() const noexcept { return gguf_ ? gguf_->more() : more_; }
    read_op op() noexcept;
    void got();
    shard_header finish();

private:
    void next();
    const source& src_;
    std::optional<gguf_stream> gguf_;
    // safetensors
    std::optional<header_parser> parser_;
    std::uint64_t n_ = 0;     // header bytes
    std::uint64_t have_ = 0;  // header bytes fed so far
    std::size_t len_ = 0;     // bytes of the next piece
    bool more_ = false;
    std::string buf_;
};

[[noreturn]] void header_read_failed(const source& src, const error& e);

}  // namespace ringsafe::read
