#include "arena.hpp"

namespace py = pybind11;

namespace ringsafe::python {

void bind_arena(py::module_& m) {
    py::class_<arena>(m, "Arena", py::buffer_protocol(),
                      "Owned host memory (huge pages from 2 MiB up) exposed through the buffer protocol; "
                      "freed when the last view of it is gone.")
        .def(py::init([](std::size_t size, bool huge, bool prefault) {
                 py::gil_scoped_release nogil;  // prefaulting a large arena takes a while
                 return new arena(size, huge, prefault);
             }),
             py::arg("size"), py::arg("huge") = true, py::arg("prefault") = false,
             "Allocates `size` bytes (zeroed): on transparent huge pages from 2 MiB up unless huge=False; "
             "prefault=True touches every page now (by default the first write faults each page in: "
             "reads into a fresh arena then fault on all I/O threads at once, which measured faster).")
        .def_property_readonly("address", [](const arena& a) { return reinterpret_cast<std::uintptr_t>(a.memory.data()); },
                               "Address of the first byte.")
        .def("__len__", [](const arena& a) { return a.memory.size(); })
        .def("pages", [](const arena& a) { return a.memory.pages().label(); },
             "What backs the memory now: 'THP', '4KiB', 'mixed(NN% THP)' or 'untouched'.")
        .def_buffer([](arena& a) {
            return py::buffer_info(a.memory.data(), 1, py::format_descriptor<std::uint8_t>::format(), 1,
                                   {static_cast<py::ssize_t>(a.memory.size())}, {1}, false);
        });
}

}  // namespace ringsafe::python
