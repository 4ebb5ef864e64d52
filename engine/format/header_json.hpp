// The JSON stage of header parsing (internal to the format component).
#pragma once

#include <string_view>

#include "ringsafe/error.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe::format {

// Parses the header JSON (already known to be valid UTF-8) straight into
// `out.tensors` (in the order of the keys, not yet validated or sorted) and
// `out.metadata`, with the reference's mapping rules. On a syntax or shape
// error returns false and fills `st` with InvalidHeaderDeserialization and a
// message giving the byte position.
bool parse_header_json(std::string_view json, header& out, status& st);

// The nesting limit of the reference's JSON library: 127 nested arrays or
// objects are accepted, the 128th is refused.
inline constexpr std::size_t max_json_depth = 127;

}  // namespace ringsafe::format
