// Writing GGUF from Python: gguf_save, a whole dict of tensors through the
// declared GGUF writer (the exact header), written straight from the
// tensors' memory with the GIL released. ringsafe._gguf_write builds
// ringsafe.gguf.save_file on it.
#include <pybind11/stl.h>

#include <algorithm>
#include <deque>

#include "arguments.hpp"
#include "bindings.hpp"
#include "ringsafe/gguf_writer.hpp"

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

// [(key, type, element_type or None, [values])] -> entries in that order.
std::vector<gguf::metadata_entry> parse_entries(const py::list& items) {
    std::vector<gguf::metadata_entry> out;
    for (auto item : items) {
        auto t = item.cast<py::tuple>();
        const std::string key = t[0].cast<std::string>();
        const value_type type = type_named(t[1].cast<std::string>(), key);
        std::deque<std::string> text;
        std::vector<gguf::scalar> values;
        const value_type element = type == value_type::ARRAY ? type_named(t[2].cast<std::string>(), key) : type;
        for (auto v : t[3].cast<py::list>()) values.push_back(scalar_of(v, element, key, text));
        if (type == value_type::ARRAY) out.push_back(gguf::metadata_entry::make_array(key, element, values));
        else out.push_back(gguf::metadata_entry::make(key, type, values.at(0)));
    }
    return out;
}

}  // namespace

void bind_gguf_writer(py::module_& m) {
    m.def("gguf_save",
          [](const py::object& path_arg_, const py::list& tensors, const py::list& metadata, std::uint32_t alignment,
             bool sync) {
              const std::string path = path_arg(path_arg_, "path");
              std::vector<gguf::tensor_record> records;
              std::vector<std::span<const std::byte>> data;
              for (auto item : tensors) {
                  auto t = item.cast<py::tuple>();
                  gguf::tensor_record r;
                  r.name = tensor_name(t[0]);
                  const auto dt = dtype_from_name(t[1].cast<std::string>());
                  const auto g = dt ? ggml_type_for(*dt) : std::nullopt;
                  if (!g)
                      raise(errc::InvalidArgument, "tensor '" + r.name + "' is of dtype " + t[1].cast<std::string>() +
                                                       ", which GGUF has no type for (F32, F16, BF16, F64, I8..I64)");
                  r.type = *g;
                  for (auto d : t[2]) r.ne.push_back(d.cast<std::uint64_t>());
                  std::reverse(r.ne.begin(), r.ne.end());  // PyTorch order -> ggml's ne
                  data.emplace_back(reinterpret_cast<const std::byte*>(t[3].cast<std::uintptr_t>()),
                                    t[4].cast<std::size_t>());
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
          "Writes [(name, dtype, shape, address, nbytes)] and [(key, type, element_type, [values])] as a GGUF file.");
}

}  // namespace ringsafe::python
