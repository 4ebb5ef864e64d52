// ringsafe's error model in Python: ringsafe::error becomes SafetensorError
// (format and usage errors, with .kind) or OSError's errno subclass
// (FileNotFoundError, PermissionError, ...), with the engine's message as
// .strerror and the path it is about (ringsafe::error::path()) as .filename.
#pragma once

#include <pybind11/pybind11.h>

namespace ringsafe::python {

// Creates ringsafe._ringsafe.SafetensorError and installs the translator.
void register_errors(pybind11::module_& m);

}  // namespace ringsafe::python
