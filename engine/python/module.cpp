// ringsafe._ringsafe: the compiled half of the Python package. The Python
// modules in engine/python/ringsafe/ build the safetensors-style API on it.
#include <pybind11/pybind11.h>

#include "arena.hpp"
#include "bindings.hpp"
#include "errors.hpp"

PYBIND11_MODULE(_ringsafe, m) {
    m.doc() = "ringsafe's engine for Python: io_uring and HTTP reads into caller memory, streaming writes.";
    m.attr("__version__") = RINGSAFE_VERSION;  // meson.build's project version
    ringsafe::python::register_errors(m);
    ringsafe::python::bind_arena(m);
    ringsafe::python::bind_reader(m);
    ringsafe::python::bind_writer(m);
    ringsafe::python::bind_mapping(m);
    ringsafe::python::bind_header(m);
    ringsafe::python::bind_device(m);
    ringsafe::python::bind_dequantize(m);
    ringsafe::python::bind_gguf(m);
    ringsafe::python::bind_gguf_writer(m);
    ringsafe::python::bind_convert(m);
}
