// Output of `ls` and `verify`: the tensor table as JSON (the CLI contract) or
// as a readable, terminal-safe table (failures: failure_report.hpp). Kept apart from the commands so
// other subcommands can print the same listing.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "ringsafe/header.hpp"

namespace ringsafe::cli {

// {"ok":true,"tensors":[{"name","dtype","shape","data_offsets"[,"sha256"]}...],"metadata":null|{...}}
// followed by a newline. `sha256` is empty (ls) or one hex digest per tensor.
void print_listing_json(std::FILE* out, const header& h, const std::vector<std::string>& sha256);

// Columns NAME, DTYPE, SHAPE, SIZE (and SHA256 when given), then the metadata
// and a summary line.
void print_listing_table(std::FILE* out, const header& h, const std::vector<std::string>& sha256);

// "[4096,4096]"
std::string shape_text(const std::vector<std::uint64_t>& shape);

}  // namespace ringsafe::cli
