// Writing GGUF from Python: gguf_save, a whole dict of tensors through the
// declared GGUF writer (the exact header), written straight from the
// tensors' memory with the GIL released, and GGUFStreamWriter, the streaming
// writer. ringsafe._gguf_write builds ringsafe.gguf.save_file and Writer on them.
#include <pybind11/stl.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <optional>

#include "arguments.hpp"
#include "bindings.hpp"
#include "ringsafe/gguf_writer.hpp"
#include "writer_stats_object.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

using gguf::value_type;

value_type type_named(const std::string& name, const std::string& key) {
    auto t = gguf::value_type_from_name(name);
    if (!t) raise(errc::InvalidArgument, "metadata key '" + key + "': unknown GGUF value type '" + name + "'");
    return *t;
}

bool is_unsigned(value_type t) {
    return t == value_type::UINT8 || t == value_type::UINT16 || t == value_type::UINT32 || t == value_type::UINT64;
}

// One Python value as a scalar of `t`; strings are kept alive in `text`.
gguf::scalar scalar_of(const py::handle& v, value_type t, const std::string& key, std::deque<std::string>& text) {
    if (t == value_type::STRING) {
        if (!py::isinstance<py::str>(v))
            throw py::type_error("metadata key '" + key + "': a STRING value must be str, not " +
                                 std::string(py::str(py::type::handle_of(v).attr("__name__"))));
        return std::string_view(text.emplace_back(v.cast<std::string>()));
    }
    if (t == value_type::BOOL) return v.cast<bool>();
    if (t == value_type::FLOAT32 || t == value_type::FLOAT64) return v.cast<double>();
    if (!py::isinstance<py::int_>(v))
        throw py::type_error("metadata key '" + key + "': an integer type needs an int, not " +
                             std::string(py::str(py::type::handle_of(v).attr("__name__"))));
    const auto x = index_int(v);
    if (x && x->overflow > 0 && t == value_type::UINT64) {
        const unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());  // above INT64_MAX
        if (!PyErr_Occurred()) return std::uint64_t{u};
        PyErr_Clear();
    }
    if (!x || x->overflow != 0)
        raise(errc::InvalidArgument, "metadata key '" + key + "': " + std::string(py::str(v)) + " does not fit " +
                                         std::string(gguf::value_type_name(t)));
    if (is_unsigned(t)) {
        if (x->value < 0)
            raise(errc::InvalidArgument, "metadata key '" + key + "': " + std::string(py::str(v)) +
                                             " is negative, " + std::string(gguf::value_type_name(t)) + " is not");
        return static_cast<std::uint64_t>(x->value);
    }
    return static_cast<std::int64_t>(x->value);
}

// GGUFEntry records (key, type, element_type or None, [values]; read by name) -> entries in that order.
std::vector<gguf::metadata_entry> parse_entries(const py::list& items) {
    std::vector<gguf::metadata_entry> out;
    for (auto item : items) {
        const std::string key = item.attr("key").cast<std::string>();
        const value_type type = type_named(item.attr("type").cast<std::string>(), key);
        std::deque<std::string> text;
        std::vector<gguf::scalar> values;
        const value_type element =
            type == value_type::ARRAY ? type_named(item.attr("element_type").cast<std::string>(), key) : type;
        for (auto v : item.attr("values").cast<py::list>()) values.push_back(scalar_of(v, element, key, text));
        if (type == value_type::ARRAY) out.push_back(gguf::metadata_entry::make_array(key, element, values));
        else out.push_back(gguf::metadata_entry::make(key, type, values.at(0)));
    }
    return out;
}

// A tensor handed over as (name, dtype or ggml type name, shape in PyTorch order): its record.
gguf::tensor_record record_of(const py::handle& name, const std::string& type, const py::handle& shape) {
    gguf::tensor_record r;
    r.name = tensor_name(name);
    if (auto dt = dtype_from_name(type)) {
        const auto g = ggml_type_for(*dt);
        if (!g)
            raise(errc::InvalidArgument, "tensor '" + r.name + "' is of dtype " + type +
                                             ", which GGUF has no type for (F32, F16, BF16, F64, I8..I64)");
        r.type = *g;
    } else if (auto g = ggml_type_from_name(type)) {
        r.type = *g;
    } else {
        raise(errc::InvalidArgument, "tensor '" + r.name + "': unknown dtype or GGUF type '" + type + "'");
    }
    for (auto d : shape) r.ne.push_back(d.cast<std::uint64_t>());
    std::reverse(r.ne.begin(), r.ne.end());  // PyTorch order -> ggml's ne
    return r;
}

// The streaming GGUF writer for Python: one call at a time (the GIL released
// around each write, a mutex keeping a second thread out).
struct py_gguf_writer {
    std::optional<gguf::writer> w;
    std::mutex m;
    gguf::writer& get() {
        if (!w) raise(errc::WriterState, "the GGUF writer is closed (finished or abandoned)");
        return *w;
    }
};

}  // namespace

void bind_gguf_writer(py::module_& m) {
    py::class_<py_gguf_writer>(m, "GGUFStreamWriter", "The streaming GGUF writer (gguf::writer).")
        .def(py::init([](const py::object& path, const py::list& metadata, std::uint32_t alignment, bool sync,
                         std::uint64_t reserve_bytes, std::uint64_t expected_tensors, bool direct) {
                 auto p = std::make_unique<py_gguf_writer>();
                 gguf::writer_options o;
                 o.alignment = alignment;
                 o.sync = o.sync_dir = sync;
                 o.reserve_bytes = reserve_bytes;
                 if (expected_tensors) o.expected_tensors = expected_tensors;
                 o.direct = direct;
                 const std::string spec = path_arg(path, "path");
                 auto entries = parse_entries(metadata);
                 py::gil_scoped_release nogil;
                 p->w.emplace(spec, std::move(entries), o);
                 return p;
             }),
             py::arg("path"), py::arg("metadata"), py::arg("alignment"), py::arg("sync"), py::arg("reserve_bytes"),
             py::arg("expected_tensors"), py::arg("direct"))
        .def("add",
             [](py_gguf_writer& self, const py::handle& name, const std::string& type, const py::handle& shape,
                std::uintptr_t address, std::size_t nbytes) {
                 const auto r = record_of(name, type, shape);
                 const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(address), nbytes);
                 py::gil_scoped_release nogil;
                 std::lock_guard lock(self.m);
                 self.get().add(r, bytes);
             },
             py::arg("name"), py::arg("type_name"), py::arg("shape"), py::arg("address"), py::arg("nbytes"))
        .def("finish",
             [](py_gguf_writer& self, const py::object& metadata) {
                 std::optional<std::vector<gguf::metadata_entry>> md;
                 if (!metadata.is_none()) md = parse_entries(metadata.cast<py::list>());
                 {
                     py::gil_scoped_release nogil;
                     std::lock_guard lock(self.m);
                     auto& w = self.get();
                     try {
                         w.finish(md ? &*md : nullptr);
                     } catch (...) {
                         self.w.reset();
                         throw;
                     }
                 }
                 py::dict d = writer_stats_dict(self.w->stats(), "header_bytes");
                 self.w.reset();
                 return d;
             },
             py::arg("metadata"))
        .def("abandon",
             [](py_gguf_writer& self) {
                 py::gil_scoped_release nogil;
                 std::lock_guard lock(self.m);
                 if (self.w) self.w->abandon();
                 self.w.reset();
             })
        .def_property_readonly("closed", [](py_gguf_writer& self) { return !self.w; });

    m.def("gguf_save",
          [](const py::object& path_arg_, const py::list& tensors, const py::list& metadata, std::uint32_t alignment,
             bool sync) {
              const std::string path = path_arg(path_arg_, "path");
              std::vector<gguf::tensor_record> records;
              std::vector<std::span<const std::byte>> data;
              // DescribedTensor records, their fields read by name (the names made once per call).
              const py::str name_f("name"), dtype_f("dtype"), shape_f("shape"), address_f("address"),
                  nbytes_f("nbytes");
              for (auto item : tensors) {
                  gguf::tensor_record r =
                      record_of(item.attr(name_f), item.attr(dtype_f).cast<std::string>(), item.attr(shape_f));
                  data.emplace_back(reinterpret_cast<const std::byte*>(item.attr(address_f).cast<std::uintptr_t>()),
                                    item.attr(nbytes_f).cast<std::size_t>());
                  const std::uint64_t need = gguf::tensor_bytes(r);  // names what ggml's reader would refuse
                  if (need != data.back().size())
                      raise(errc::InvalidArgument, "tensor '" + r.name + "': " + std::to_string(data.back().size()) +
                                                       " bytes given, its type and shape need " + std::to_string(need));
                  records.push_back(std::move(r));
              }
              auto entries = parse_entries(metadata);
              py::gil_scoped_release nogil;
              gguf::writer_options o;
              o.alignment = alignment;
              o.sync = o.sync_dir = sync;
              gguf::declared_writer w(path, std::move(entries), std::move(records), o);
              for (std::size_t i = 0; i < data.size(); ++i) w.write(i, 0, data[i]);
              w.finish();
          },
          py::arg("path"), py::arg("tensors"), py::arg("metadata"), py::arg("alignment"), py::arg("sync"),
          "Writes DescribedTensor records (name, dtype, shape, address, nbytes) and GGUFEntry records (key, "
          "type, element_type, values) as a GGUF file.");
}

}  // namespace ringsafe::python
