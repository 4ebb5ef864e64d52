// ringsafe/device.hpp for Python: whether a CUDA runtime loads, and the
// DeviceStager kept across device reads (the reads themselves are
// read_to_device_at, on a Reader: reader_binding.cpp).
#include <pybind11/stl.h>

#include <cstddef>
#include <memory>
#include <string>

#include "bindings.hpp"
#include "device_request.hpp"
#include "ringsafe/device.hpp"

namespace py = pybind11;

namespace ringsafe::python {

void bind_device(py::module_& m) {
    m.def("cuda_runtime_available", [] {
              std::string why;
              bool ok = cuda_runtime_available(&why);
              return py::make_tuple(ok, why);
          },
          "(True, '') when the CUDA runtime can be loaded, else (False, the reason).");
    py::class_<device_stager, std::shared_ptr<device_stager>>(
        m, "DeviceStager",
        "A staging ring and copier kept across device reads (read_to_device_at(..., stager=)): pinned "
        "buffers made on first use and reused, freed by close().")
        .def(py::init([](int device, bool stand_in, std::size_t staging_size, std::size_t staging_count) {
                 return std::make_shared<device_stager>(
                     device_request_of({}, device, staging_size, staging_count, stand_in).options);
             }),
             py::arg("device") = 0, py::arg("stand_in") = false, py::arg("staging_size") = std::size_t{16} << 20,
             py::arg("staging_count") = 4)
        .def_property_readonly("staging_buffers", &device_stager::staging_buffers,
                               "Staging buffers held now (at most staging_count).")
        .def_property_readonly("device", [](const device_stager& s) { return s.options().device; })
        .def_property_readonly("stand_in", [](const device_stager& s) { return s.options().stand_in; })
        .def("close", &device_stager::release, py::call_guard<py::gil_scoped_release>(),
             "Frees the staging buffers and the copier now (waits for a read in progress); a later read makes "
             "them again.");
}

}  // namespace ringsafe::python
