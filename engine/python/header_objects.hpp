// Header values as the Python objects both the Reader and the in-memory
// parsers hand out (engine-internal, the Python front end only).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>

#include "ringsafe/header.hpp"

namespace ringsafe::python {

// (name, dtype, shape, begin, end, shard): shape a list, offsets relative to the shard's data section.
inline pybind11::tuple tensor_tuple(const tensor_info& t, std::uint32_t shard) {
    pybind11::list shape;
    for (auto d : t.shape) shape.append(d);
    return pybind11::make_tuple(pybind11::str(t.name), pybind11::str(std::string(dtype_name(t.dtype))), shape,
                                t.begin, t.end, shard);
}

// __metadata__ as a dict of str, or None.
inline pybind11::object metadata_object(const std::optional<metadata_map>& md) {
    if (!md) return pybind11::none();
    pybind11::dict d;
    for (const auto& [k, v] : *md) d[pybind11::str(k)] = pybind11::str(v);
    return d;
}

}  // namespace ringsafe::python
