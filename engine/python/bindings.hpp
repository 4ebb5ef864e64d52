// The pieces module.cpp assembles into ringsafe._ringsafe (engine-internal),
// besides register_errors (errors.hpp) and bind_arena (arena.hpp).
#pragma once

#include <pybind11/pybind11.h>

namespace ringsafe::python {

// Reader, Plan, Pending; is_url, fetch_file, http_connections; the raw-address
// calls plan_tensors_at, plan_requests_at.
void bind_reader(pybind11::module_& m);
void bind_writer(pybind11::module_& m);   // StreamWriter, save_declared, serialize
void bind_mapping(pybind11::module_& m);  // MappedFile
void bind_header(pybind11::module_& m);   // TensorInfo, ShardInfo, parse_bytes, parse_prefix, parse_header, glob_match
// cuda_runtime_available, DeviceStager, read_to_device_at (and the stand-in's
// test entry _stand_in_read_with_hooks).
void bind_device(pybind11::module_& m);
void bind_dequantize(pybind11::module_& m);  // dequantize, can_dequantize
void bind_gguf(pybind11::module_& m);        // gguf_header, gguf_tensors, gguf_read
void bind_gguf_writer(pybind11::module_& m);  // gguf_save
void bind_convert(pybind11::module_& m);      // convert (ringsafe::convert_file)

}  // namespace ringsafe::python
