// JSON text for a safetensors target's metadata and index: GGUF metadata
// values (what a GGUF source's keys become under `gguf.` keys) and strings of
// any bytes (engine-internal).
#pragma once

#include <string>
#include <string_view>

#include "ringsafe/gguf.hpp"

namespace ringsafe::convert {

// Appends `text` as a JSON string (Boost.JSON's escaping); each byte that is
// not part of strict UTF-8 becomes U+FFFD, as Python's errors="replace" does.
void append_json_string(std::string& out, std::string_view text);

// The JSON text of an entry's value: a scalar (integers exact, doubles in
// their shortest round-trip form, NaN and infinities as the strings "NaN",
// "Infinity", "-Infinity"), or an array of its elements.
std::string metadata_value_json(const gguf::metadata_entry& e);

}  // namespace ringsafe::convert
