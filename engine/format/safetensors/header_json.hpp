// The JSON stage of header parsing (internal to the format component).
#pragma once

#include <boost/json/error.hpp>

#include <cstdint>
#include <memory>
#include <string_view>

#include "ringsafe/error.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe::format {

// Parses header JSON fed in pieces (already known to be valid UTF-8, or to be
// checked by the caller before it reports a JSON error) straight into
// `out.tensors` (in the order of the keys, not yet validated or sorted) and
// `out.metadata`, with the reference's mapping rules.
class header_json {
public:
    // `out` must outlive the parser; `size` is N, the bytes that will be fed.
    header_json(header& out, std::uint64_t size);
    ~header_json();
    header_json(const header_json&) = delete;
    header_json& operator=(const header_json&) = delete;

    // Parses the next bytes. On a syntax or shape error returns false and
    // fills `st` with InvalidHeaderDeserialization and a message giving the
    // byte position within all bytes fed; feed no more after that.
    bool feed(std::string_view bytes, status& st);
    // After the last bytes: false (and `st`) when the JSON is incomplete.
    bool finish(status& st);

private:
    struct impl;
    bool failed(const boost::json::error_code& ec, std::uint64_t at, status& st);
    std::unique_ptr<impl> p_;
};

// The nesting limit of the reference's JSON library: 127 nested arrays or
// objects are accepted, the 128th is refused.
inline constexpr std::size_t max_json_depth = 127;

// The fewest bytes a tensor entry in object form takes: "":{"dtype":"U8","shape":[],"data_offsets":[0,1]},
inline constexpr std::uint64_t min_entry_bytes = 50;

}  // namespace ringsafe::format
