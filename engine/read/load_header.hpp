// Reading a safetensors header through a source.
#pragma once

#include "ringsafe/header.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe::detail {

// Parses the header from the source's prefix; issues one read_exact for the
// part of the header beyond the prefix, only when 8 + N exceeds it. Errors are
// parse_length_prefix()/parse_header()'s, with the source's name in front.
header load_header(source& src, const parse_options& opts);

}  // namespace ringsafe::detail
