// ringsafe's error model in Python: ringsafe::error becomes SafetensorError
// (format and usage errors, with .kind), or for system errors a class that is
// both OSError's errno subclass (FileNotFoundError, PermissionError, ...) and
// SafetensorError, with the path it is about (ringsafe::error::path()) as
// .filename and as .strerror (and str()) the reference's text ("No such file
// or directory: NAME") followed by the engine's message.
#pragma once

#include <pybind11/pybind11.h>

namespace ringsafe::python {

// Creates ringsafe._ringsafe.SafetensorError and installs the translator.
void register_errors(pybind11::module_& m);

}  // namespace ringsafe::python
