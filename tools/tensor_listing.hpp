// Output of `ls` and `verify`: the tensor table as JSON (the CLI contract) or
// as a readable, terminal-safe table (failures: failure_report.hpp). Kept apart
// from the commands so other subcommands can print the same listing. Rows are
// formatted one at a time: memory does not grow with the number of tensors.
#pragma once

#include <cstdio>
#include <span>
#include <string>

#include "tensor_hashes.hpp"

namespace ringsafe::cli {

// {"ok":true,"format":"safetensors","tensors":[{"name","dtype","shape","data_offsets"[,"sha256"]}...],
// "metadata":null|{...}} followed by a newline. `sha256` is null (ls) or one
// digest per tensor, read from the first.
void print_listing_json(std::FILE* out, const listing& l, digest_store* sha256);

// Columns NAME, DTYPE, SHAPE, SIZE (and SHA256 when given), then the metadata
// and a summary line.
void print_listing_table(std::FILE* out, const listing& l, digest_store* sha256);

// "[4096,4096]"
std::string shape_text(std::span<const std::uint64_t> shape);

// A tensor's type as listings show it: its GGUF type ("Q4_K"), else its dtype ("BF16").
std::string type_text(const tensor_info& t);

// The table's header line and one row per tensor (NAME, DTYPE or GGUF's TYPE, SHAPE, SIZE[, SHA256]).
void print_tensor_rows(std::FILE* out, std::span<const tensor_info> tensors, digest_store* sha256);

}  // namespace ringsafe::cli
