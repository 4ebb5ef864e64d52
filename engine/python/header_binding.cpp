// Header parsing for bytes held in Python: a whole file in memory (load(),
// deserialize()) or a header read piecewise from a Python file object.
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "arguments.hpp"
#include "bindings.hpp"
#include "header_objects.hpp"
#include "ringsafe/header.hpp"
#include "ringsafe/selection.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

// (tensors, metadata, data_start): tensors as (name, dtype, shape, begin, end, 0) in data order.
py::tuple header_tuple(const header& h) {
    py::list tensors;
    for (const auto& t : h.tensors) tensors.append(tensor_tuple(t, 0));
    return py::make_tuple(tensors, metadata_object(h.metadata), h.data_start());
}

}  // namespace

void bind_header(py::module_& m) {
    m.def("parse_bytes",
          [](const py::object& data) {
              py::object hold;  // the export, held while the bytes are parsed
              const auto bytes = readable_bytes(data, "data", hold);
              return header_tuple(parse_file(bytes));
          },
          py::arg("data"),
          "Parses and validates a whole file held in a C-contiguous bytes-like object (TypeError for a "
          "strided or reversed view): (tensors, metadata, data_start).");
    m.def("parse_prefix",
          [](const py::bytes& prefix, std::uint64_t file_size, std::uint64_t max_header_size) {
              std::string_view v = prefix;
              parse_options o;
              o.max_header_size = max_header_size;
              return parse_length_prefix({reinterpret_cast<const std::byte*>(v.data()), v.size()}, file_size, o);
          },
          py::arg("prefix"), py::arg("file_size"), py::arg("max_header_size") = default_max_header_size,
          "The header length N from the file's first 8 bytes, checked against the file's size.");
    m.def("parse_header",
          [](const py::bytes& json, std::uint64_t file_size, std::uint64_t max_header_size) {
              std::string_view v = json;
              parse_options o;
              o.max_header_size = max_header_size;
              return header_tuple(parse_header(v, file_size, o));
          },
          py::arg("json"), py::arg("file_size"), py::arg("max_header_size") = default_max_header_size,
          "Parses and validates the N header bytes of a file of `file_size` bytes: (tensors, metadata, data_start).");
    m.def("glob_match", [](std::string_view pattern, std::string_view name) { return glob_match(pattern, name); },
          py::arg("pattern"), py::arg("name"),
          "The engine's glob rule (fnmatch without flags, on UTF-8 code points, \\ escapes), for sources "
          "without a Reader.");
}

}  // namespace ringsafe::python
