// Output of `ls` and `verify` for a GGUF checkpoint (a file or a split set):
// the JSON contract, spelled as gguf-py spells types, and a readable table
// that leads with what a person looks for first and never dumps a long array.
#pragma once

#include <cstdio>

#include "ringsafe/reader.hpp"
#include "tensor_hashes.hpp"

namespace ringsafe::cli {

// One line: {"ok":true,"format":"gguf","version","alignment","data_offset",
// "metadata":[{"key","type","value"} | {"key","type":"ARRAY","element_type","value":[...]}...],
// "tensors":[{"name","type","shape","ne","offset","nbytes"[,"sha256"][,"split"]}...],
// "split":null|{"no","count","tensors_count"[,"parts":[{"spec","data_offset","tensors"}...]]}}.
// Version, alignment, data_offset and metadata are the first part's; in a
// set of parts each tensor says which ("split": its part's split.no).
void print_gguf_json(std::FILE* out, const reader& r, digest_store* sha256);

// The architecture, name, parameter count, quantization (general.file_type
// and the tensor types), context length; the tensor rows; then every
// metadata entry, arrays summarized (their first elements and a count).
void print_gguf_table(std::FILE* out, const reader& r, digest_store* sha256);

}  // namespace ringsafe::cli
