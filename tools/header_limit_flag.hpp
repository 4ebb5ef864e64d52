// --max-header-size BYTES: the cap on a header's bytes (safetensors' length N,
// GGUF's bytes to the end of its tensor infos), for every subcommand that reads a
// header (ls, verify, load, get, cp).
#pragma once

#include "args.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe::cli {

// The option's help line, to be concatenated into a subcommand's help.
#define RINGSAFE_CLI_MAX_HEADER_SIZE_HELP \
    "  --max-header-size BYTES cap on a header's bytes: safetensors' length N, GGUF's\n" \
    "                          bytes to the end of its tensor infos (default 100000000; 16M, 1G accepted)\n"

// Declares --max-header-size on `p`.
void declare_header_limit(arg_parser& p);

// Sets o.max_header_size when the option is given; throws usage_error naming
// it when the value is malformed.
void apply_header_limit(const arg_parser& p, parse_options& o);

}  // namespace ringsafe::cli
