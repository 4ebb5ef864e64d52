#include "errors.hpp"

#include <system_error>

#include "ringsafe/error.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {
PyObject* safetensor_error = nullptr;

void set_safetensor_error(const std::string& kind, const char* message) {
    py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(safetensor_error, "s", message));
    if (!exc) return;  // the call itself set an error
    exc.attr("kind") = kind;
    PyErr_SetObject(safetensor_error, exc.ptr());
}

void set_from(const ringsafe::error& e) {
    const std::error_code& ec = e.code();
    if (ec.category() == std::system_category()) {
        // OSError(errno, text[, filename]) picks the errno's subclass
        // (FileNotFoundError, ...): .errno is the errno, .strerror the
        // engine's message, .filename the path it is about (None without one).
        // The filename is decoded as Python decodes paths (surrogateescape).
        py::object filename = e.path().empty()
                                  ? py::none()
                                  : py::reinterpret_steal<py::object>(PyUnicode_DecodeFSDefault(e.path().c_str()));
        if (!filename) return;  // the decoding set an error
        py::object exc = py::reinterpret_steal<py::object>(
            PyObject_CallFunction(PyExc_OSError, "isO", ec.value(), e.what(), filename.ptr()));
        if (exc) PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
        return;
    }
    set_safetensor_error(std::string(e.kind()), e.what());
}
}  // namespace

void register_errors(py::module_& m) {
    safetensor_error = PyErr_NewExceptionWithDoc(
        "ringsafe.SafetensorError",
        "A format or usage error: a bad header, a missing tensor, a bad argument, a failed remote "
        "read. str() is the engine's message (file, offset, tensor or URL); .kind names the error "
        "kind as the reference spells it (InvalidHeaderDeserialization, TensorNotFound, ...).",
        PyExc_Exception, nullptr);
    m.add_object("SafetensorError", py::handle(safetensor_error));
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const ringsafe::error& e) {
            set_from(e);
        }
    });
}

}  // namespace ringsafe::python
