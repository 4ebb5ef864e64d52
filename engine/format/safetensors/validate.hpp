// The layout stage of header parsing (internal to the format component).
#pragma once

#include <cstdint>

#include "ringsafe/error.hpp"
#include "ringsafe/header.hpp"

namespace ringsafe::format {

// Puts `h.tensors` (as the JSON stage left them) in data order, builds the
// name index, and applies the reference's checks in its order: duplicate
// names (ringsafe's own rule), then per tensor in data order InvalidOffset,
// ValidationOverflow, MisalignedSlice, TensorInvalidInfo, and finally that
// 8 + h.header_size + the last end equals `file_size` (MetadataIncompleteBuffer).
// Sets h.data_size. Returns false and fills `st` on the first failure.
bool validate_layout(header& h, std::uint64_t file_size, status& st);

// "[a,b,c]": a shape or an offset pair for messages.
std::string format_dims(const std::uint64_t* dims, std::size_t count);

}  // namespace ringsafe::format
