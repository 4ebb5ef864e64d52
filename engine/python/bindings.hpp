// The pieces module.cpp assembles into ringsafe._ringsafe (engine-internal).
#pragma once

#include <pybind11/pybind11.h>

namespace ringsafe::python {

void bind_reader(pybind11::module_& m);  // Reader, Plan, Pending
void bind_writer(pybind11::module_& m);  // StreamWriter, save_declared, serialize

}  // namespace ringsafe::python
