// The pieces module.cpp assembles into ringsafe._ringsafe (engine-internal).
#pragma once

#include <pybind11/pybind11.h>

namespace ringsafe::python {

void bind_reader(pybind11::module_& m);  // Reader, Plan, Pending
void bind_writer(pybind11::module_& m);   // StreamWriter, save_declared, serialize
void bind_mapping(pybind11::module_& m);  // MappedFile
void bind_header(pybind11::module_& m);   // parse_bytes, parse_prefix, parse_header
void bind_device(pybind11::module_& m);   // read_to_device, cuda_runtime_available

}  // namespace ringsafe::python
