#include "arguments.hpp"

#include "ringsafe/error.hpp"
#include "ringsafe/open_source.hpp"
#include "ringsafe/source.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

std::string type_name(const py::handle& obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

// A memoryview of `obj` (holding its export) that is C-contiguous.
py::object contiguous_view(const py::handle& obj, const std::string& what) {
    if (!PyObject_CheckBuffer(obj.ptr()))
        throw py::type_error(what + " must be a bytes-like object (the buffer protocol), not " + type_name(obj));
    py::object view = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(obj.ptr()));
    if (!view) throw py::error_already_set();
    if (!PyBuffer_IsContiguous(PyMemoryView_GET_BUFFER(view.ptr()), 'C'))
        throw py::type_error(what + " must be C-contiguous memory; this " + type_name(obj) +
                             " is strided or reversed (copy it first, e.g. bytes(view))");
    return view;
}

}  // namespace

std::span<const std::byte> readable_bytes(const py::handle& obj, const std::string& what, py::object& hold) {
    hold = contiguous_view(obj, what);
    const Py_buffer* b = PyMemoryView_GET_BUFFER(hold.ptr());
    return {static_cast<const std::byte*>(b->buf), static_cast<std::size_t>(b->len)};
}

std::span<std::byte> writable_bytes(const py::handle& obj, const std::string& what, std::vector<py::object>& keep) {
    py::object view = contiguous_view(obj, what);
    Py_buffer* b = PyMemoryView_GET_BUFFER(view.ptr());
    if (b->readonly) throw py::type_error(what + " is read-only (" + type_name(obj) + "); the engine writes into it");
    keep.push_back(view);
    return {static_cast<std::byte*>(b->buf), static_cast<std::size_t>(b->len)};
}

std::string path_arg(const py::handle& obj, const char* what) {
    py::object fs = py::reinterpret_steal<py::object>(PyOS_FSPath(obj.ptr()));
    if (!fs) {
        PyErr_Clear();
        throw py::type_error(std::string(what) + " must be a path (str, bytes or os.PathLike), not " + type_name(obj));
    }
    if (PyBytes_Check(fs.ptr())) return std::string(py::bytes(fs));
    // str: os.fsencode's bytes (surrogateescape gives back the bytes a name had on disk).
    py::object b = py::reinterpret_steal<py::object>(PyUnicode_EncodeFSDefault(fs.ptr()));
    if (!b) throw py::error_already_set();
    return std::string(py::bytes(b));
}

py::str path_str(const std::string& path) {
    py::object s = py::reinterpret_steal<py::object>(
        PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size())));
    if (!s) throw py::error_already_set();
    return py::reinterpret_borrow<py::str>(s);
}

std::string shown_spec(const std::string& spec) { return is_url(spec) ? without_url_secrets(spec) : spec; }

std::optional<std::string> utf8_of(const py::handle& obj) {
    Py_ssize_t n = 0;
    const char* p = PyUnicode_AsUTF8AndSize(obj.ptr(), &n);
    if (!p) {
        PyErr_Clear();
        return std::nullopt;
    }
    return std::string(p, static_cast<std::size_t>(n));
}

std::string ascii_of(const py::handle& obj) {
    py::object shown = py::reinterpret_steal<py::object>(PyObject_ASCII(obj.ptr()));
    if (!shown) throw py::error_already_set();
    return std::string(py::str(shown));
}

std::string tensor_name(const py::handle& obj) {
    if (!PyUnicode_Check(obj.ptr())) throw py::type_error("tensor names must be str, not " + type_name(obj));
    auto text = utf8_of(obj);
    if (!text)
        raise(errc::InvalidArgument, "tensor name " + ascii_of(obj) +
                                         " cannot be encoded as UTF-8 (it holds a lone surrogate); safetensors "
                                         "names are UTF-8");
    return std::move(*text);
}

std::vector<std::string> tensor_names(const py::handle& seq) {
    if (PyUnicode_Check(seq.ptr()) || !PySequence_Check(seq.ptr()))
        throw py::type_error("tensor names must be a list of str, not " + type_name(seq));
    std::vector<std::string> out;
    for (auto n : seq) out.push_back(tensor_name(n));
    return out;
}

std::optional<int_arg> index_int(const py::handle& v) {
    if (!PyIndex_Check(v.ptr()) || PyBool_Check(v.ptr())) return std::nullopt;
    const py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
    if (!as_int) throw py::error_already_set();
    int_arg out;
    out.value = PyLong_AsLongLongAndOverflow(as_int.ptr(), &out.overflow);
    if (out.overflow == 0 && out.value == -1 && PyErr_Occurred()) throw py::error_already_set();
    return out;
}

std::uint64_t non_negative(const py::handle& v, const std::string& what) {
    const auto x = index_int(v);
    if (!x) throw py::type_error(what + " must be an int, not " + type_name(v));
    if (x->overflow > 0) raise(errc::InvalidArgument, what + " " + std::string(py::str(v)) + " is too large");
    if (x->overflow < 0 || x->value < 0)
        raise(errc::InvalidArgument, what + " must not be negative, got " + std::string(py::str(v)));
    return static_cast<std::uint64_t>(x->value);
}

std::uint64_t option_uint(const py::handle& v, const std::string& owner, const std::string& key, std::uint64_t lo,
                          std::uint64_t hi) {
    const auto x = index_int(v);
    if (!x) throw py::type_error(owner + " option " + key + " must be an int, not " + type_name(v));
    if (x->overflow != 0 || x->value < 0 || static_cast<std::uint64_t>(x->value) < lo ||
        static_cast<std::uint64_t>(x->value) > hi)
        throw py::value_error(owner + " option " + key + "=" + std::string(py::str(v)) + " is out of range " +
                              std::to_string(lo) + ".." + std::to_string(hi));
    return static_cast<std::uint64_t>(x->value);
}

bool option_bool(const py::handle& v, const std::string& owner, const std::string& key) {
    if (!py::isinstance<py::bool_>(v)) throw py::type_error(owner + " option " + key + " must be a bool, not " + type_name(v));
    return v.cast<bool>();
}

std::string option_str(const py::handle& v, const std::string& owner, const std::string& key) {
    if (!py::isinstance<py::str>(v)) throw py::type_error(owner + " option " + key + " must be a str, not " + type_name(v));
    auto text = utf8_of(v);
    if (!text) throw py::value_error(owner + " option " + key + " cannot be encoded as UTF-8 (it holds a lone surrogate)");
    return std::move(*text);
}

// ---------------------------------------------------------------- records or tuples

std::string expected_form(const record_form& form) {
    std::string fields;
    for (const char* f : form.fields) fields += (fields.empty() ? "" : ", ") + std::string(f);
    return std::string(form.call) + " takes " + form.record + " records or (" + fields + ") tuples";
}

std::vector<py::object> record_fields(const py::handle& obj, const record_form& form) {
    std::vector<py::object> out;
    out.reserve(form.fields.size());
    if (PyTuple_Check(obj.ptr()) || PyList_Check(obj.ptr())) {  // the compatibility form: positions
        const auto n = static_cast<std::size_t>(PySequence_Size(obj.ptr()));
        if (n != form.fields.size())
            raise(errc::InvalidArgument, expected_form(form) + "; got a " + type_name(obj) + " of " +
                                             std::to_string(n));
        for (std::size_t i = 0; i < n; ++i)
            out.push_back(py::reinterpret_borrow<py::sequence>(obj)[i]);
        return out;
    }
    std::string missing;
    for (const char* f : form.fields) {
        if (!py::hasattr(obj, f)) {
            missing += (missing.empty() ? "'" : ", '") + std::string(f) + "'";
            continue;
        }
        out.push_back(py::getattr(obj, f));
    }
    if (!missing.empty())
        throw py::type_error(expected_form(form) + ", not " + type_name(obj) +
                             (out.empty() ? std::string() : " (it has no " + missing + ")"));
    return out;
}

namespace {

const record_form file_range_form{"MappedFile.populate", "FileRange", {"offset", "length"}};
const record_form range_copy_form{"MappedFile.copy_to", "RangeCopy", {"offset", "length", "buffer"}};
const record_form tensor_request_form{"Reader.plan_requests", "TensorRequest", {"name", "box", "buffer"}};
const record_form addressed_request_form{"plan_requests_at", "AddressedRequest", {"name", "box", "address", "size"}};

std::span<std::byte> raw_span(const py::handle& address, const py::handle& size) {
    const auto a = non_negative(address, "address");
    return {reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(a)),
            static_cast<std::size_t>(non_negative(size, "size"))};
}

}  // namespace

file_range_arg file_range(const py::handle& obj) {
    const auto f = record_fields(obj, file_range_form);
    return {non_negative(f[0], "offset"), non_negative(f[1], "length")};
}

range_copy_arg range_copy(const py::handle& obj) {
    auto f = record_fields(obj, range_copy_form);
    return {non_negative(f[0], "offset"), non_negative(f[1], "length"), std::move(f[2])};
}

std::span<std::byte> memory_span(const py::handle& obj, const char* call) {
    const record_form form{call, "MemorySpan", {"address", "size"}};
    const auto f = record_fields(obj, form);
    return raw_span(f[0], f[1]);
}

tensor_request_arg tensor_request(const py::handle& obj) {
    auto f = record_fields(obj, tensor_request_form);
    return {tensor_name(f[0]), std::move(f[1]), std::move(f[2])};
}

addressed_request_arg addressed_request(const py::handle& obj) {
    auto f = record_fields(obj, addressed_request_form);
    return {tensor_name(f[0]), std::move(f[1]), raw_span(f[2], f[3])};
}

}  // namespace ringsafe::python
