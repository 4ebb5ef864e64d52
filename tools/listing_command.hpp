// The shared body of `ringsafe ls` and `ringsafe verify`.
#pragma once

#include <string_view>
#include <vector>

namespace ringsafe::cli {

// Parses [--json] [--one-file] [--max-header-size BYTES] SOURCE, reads the header (and with
// `hash_data` every tensor's bytes), prints the listing or the failure, and
// returns the exit status (0 valid, 1 invalid or unreadable, 2 bad usage).
int run_listing(const std::vector<std::string_view>& args, bool hash_data, std::string_view help);

}  // namespace ringsafe::cli
