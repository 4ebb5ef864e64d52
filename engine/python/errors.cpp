#include "errors.hpp"

#include <cstring>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "ringsafe/error.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {
PyObject* safetensor_error = nullptr;
// (OSError or one of its errno subclasses, the class that is both it and SafetensorError).
std::vector<std::pair<PyObject*, PyObject*>>* os_errors = nullptr;

// The engine's message as str: UTF-8, with any byte that is not (a path or a
// name quoted from a corrupt header) shown as a \xNN escape.
py::object message_text(const std::string& m) {
    return py::reinterpret_steal<py::object>(
        PyUnicode_DecodeUTF8(m.data(), static_cast<Py_ssize_t>(m.size()), "backslashreplace"));
}

void set_safetensor_error(const std::string& kind, const std::string& message) {
    py::object text = message_text(message);
    if (!text) return;  // the decoding set an error
    py::object exc = py::reinterpret_steal<py::object>(PyObject_CallOneArg(safetensor_error, text.ptr()));
    if (!exc) return;  // the call itself set an error
    exc.attr("kind") = kind;
    PyErr_SetObject(safetensor_error, exc.ptr());
}

// The class that is both `os_type` (OSError's errno subclass) and SafetensorError.
PyObject* both(PyObject* os_type) {
    for (const auto& [os, hybrid] : *os_errors)
        if (os == os_type) return hybrid;
    return os_type;
}

void set_from(const ringsafe::error& e) {
    const std::error_code& ec = e.code();
    if (ec.category() == std::system_category()) {
        // OSError(errno, text, filename) picks the errno's subclass
        // (FileNotFoundError, ...); the error raised is the class that is both
        // that subclass and SafetensorError, so `except FileNotFoundError` and
        // `except SafetensorError` both catch it. .errno is the errno,
        // .filename the path it is about (None without one, decoded as Python
        // decodes paths), .strerror and str() the reference's text exactly ("No
        // such file or directory: NAME": code compares it); the engine's message
        // (what it was doing, the index and shard) is .detail and a note
        // (__notes__, which tracebacks print after the message).
        py::object filename = e.path().empty()
                                  ? py::none()
                                  : py::reinterpret_steal<py::object>(PyUnicode_DecodeFSDefaultAndSize(
                                        e.path().data(), static_cast<Py_ssize_t>(e.path().size())));
        if (!filename) return;  // the decoding set an error
        const bool about_path = !e.path().empty();
        py::object message = message_text(about_path ? std::string(std::strerror(ec.value())) + ": " + e.path()
                                                     : e.message());
        if (!message) return;
        py::object detail = message_text(e.message());
        if (!detail) return;
        py::object probe = py::reinterpret_steal<py::object>(
            PyObject_CallFunction(PyExc_OSError, "iOO", ec.value(), message.ptr(), filename.ptr()));
        if (!probe) return;
        py::object exc = py::reinterpret_steal<py::object>(PyObject_CallFunction(
            both(reinterpret_cast<PyObject*>(Py_TYPE(probe.ptr()))), "iOO", ec.value(), message.ptr(), filename.ptr()));
        if (!exc) return;
        exc.attr("kind") = std::string(e.kind());
        exc.attr("detail") = detail;
        if (about_path) {
            py::list notes;
            notes.append(detail);
            exc.attr("__notes__") = notes;
        }
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
        return;
    }
    set_safetensor_error(std::string(e.kind()), e.message());
}

// ringsafe._ringsafe.<Name>: builtins.<Name> (an OSError) and SafetensorError at once.
void add_os_error(py::module_& m, PyObject* os_type) {
    const std::string name = py::str(py::handle(os_type).attr("__name__"));
    py::tuple bases = py::make_tuple(py::handle(os_type), py::handle(safetensor_error));
    const std::string doc = "A " + name + " from ringsafe's engine that is also a SafetensorError (so both `except " +
                            name + "` and `except SafetensorError` catch it); str() is .strerror: the system's "
                            "text and the path, as the reference writes them ('No such file or directory: NAME'); "
                            ".detail (also in __notes__) the engine's message.";
    PyObject* cls = PyErr_NewExceptionWithDoc(("ringsafe._ringsafe." + name).c_str(), doc.c_str(), bases.ptr(), nullptr);
    if (!cls) throw py::error_already_set();
    py::handle h(cls);
    // str(): .strerror alone (OSError's own str puts "[Errno N]" before it and the path after).
    py::object os_str = py::handle(PyExc_OSError).attr("__str__");
    py::setattr(h, "__str__", py::cpp_function(
                                  [os_str](py::handle self) -> py::object {
                                      py::object s = self.attr("strerror");
                                      return s.is_none() ? os_str(self) : py::str(s);
                                  },
                                  py::name("__str__"), py::is_method(h)));
    m.add_object(name.c_str(), h);
    os_errors->emplace_back(os_type, cls);
}
}  // namespace

void register_errors(py::module_& m) {
    // What `import safetensors` gives as SafetensorError under ringsafe.install():
    // a class of its own (uninstall() tells it apart and rebinds it to the
    // reference's) that catches every ringsafe error, being their base.
    PyObject* switched = PyErr_NewExceptionWithDoc(
        "safetensors.SafetensorError",
        "SafetensorError as `import safetensors` gives it under ringsafe.install(): the base of "
        "ringsafe.SafetensorError, so it catches every error ringsafe raises.",
        PyExc_Exception, nullptr);
    if (!switched) throw py::error_already_set();
    m.add_object("_SwitchedSafetensorError", py::handle(switched));
    safetensor_error = PyErr_NewExceptionWithDoc(
        "ringsafe.SafetensorError",
        "A format or usage error: a bad header, a missing tensor, a bad argument, a failed remote "
        "read. str() is the engine's message (file, offset, tensor or URL); .kind names the error "
        "kind as the reference spells it (InvalidHeaderDeserialization, TensorNotFound, ...). System "
        "errors are raised as classes that are both their OSError subclass and this.",
        switched, nullptr);
    if (!safetensor_error) throw py::error_already_set();
    m.add_object("SafetensorError", py::handle(safetensor_error));
    os_errors = new std::vector<std::pair<PyObject*, PyObject*>>();  // lives as long as the module's classes
    for (PyObject* t : {PyExc_OSError, PyExc_BlockingIOError, PyExc_ChildProcessError, PyExc_ConnectionError,
                        PyExc_BrokenPipeError, PyExc_ConnectionAbortedError, PyExc_ConnectionRefusedError,
                        PyExc_ConnectionResetError, PyExc_FileExistsError, PyExc_FileNotFoundError,
                        PyExc_InterruptedError, PyExc_IsADirectoryError, PyExc_NotADirectoryError,
                        PyExc_PermissionError, PyExc_ProcessLookupError, PyExc_TimeoutError})
        add_os_error(m, t);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const ringsafe::error& e) {
            set_from(e);
        }
    });
}

}  // namespace ringsafe::python
