// Where a JSON value sits in a safetensors header, and what it must be
// (internal to the format component; used by the event handler).
#pragma once

#include <cstdint>

namespace ringsafe::format {

// What the next JSON value means.
enum class slot : std::uint8_t {
    root,        // the document: must be an object
    meta,        // value of __metadata__: null or object
    meta_value,  // a metadata value: string
    entry,       // a tensor entry: object or 3-item array
    dtype,       // string or single-key object
    dtype_null,  // the value inside {"F32": null}
    shape,       // array of integers
    dim,         // one dimension
    offsets,     // array of exactly two integers
    offset,      // one offset
    ignored,     // an unknown field's value: anything
    excess,      // an item beyond the 3 of an entry array or the 2 of data_offsets
};

// The container being filled.
enum class frame_kind : std::uint8_t { top, meta, entry_obj, entry_arr, dtype_obj, unit_obj, shape, offsets };

inline constexpr unsigned field_dtype = 1, field_shape = 2, field_offsets = 4, field_all = 7;

// What a value in slot `s` must be, for error messages.
inline const char* slot_what(slot s) noexcept {
    switch (s) {
        case slot::root: return "the header (a JSON object)";
        case slot::meta: return "__metadata__ (an object of strings or null)";
        case slot::meta_value: return "a __metadata__ value (a string)";
        case slot::entry: return "a tensor entry (an object or [dtype, shape, data_offsets])";
        case slot::dtype: return "a dtype (a name or {\"NAME\": null})";
        case slot::dtype_null: return "null or {} inside a {\"NAME\": null} dtype";
        case slot::shape: return "shape (an array of unsigned integers)";
        case slot::dim: return "a shape dimension (an unsigned 64-bit integer)";
        case slot::offsets: return "data_offsets (an array of two unsigned integers)";
        case slot::offset: return "a data offset (an unsigned 64-bit integer)";
        case slot::ignored: return "any value";
        case slot::excess: return "the end of the array";
    }
    return "a value";
}

}  // namespace ringsafe::format
