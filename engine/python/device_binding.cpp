// ringsafe._ringsafe.read_to_device: ringsafe/device.hpp for Python. Opens the
// checkpoint, reads the named tensors into (address, size) destinations on a
// CUDA device (or host memory with stand_in=True), GIL released; Ctrl-C or a
// raising progress callback cancels it.
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "blocking_call.hpp"
#include "device_request.hpp"
#include "ringsafe/device.hpp"
#include "ringsafe/reader.hpp"

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
        "A staging ring and copier kept across device reads (Reader.read_to_device(..., stager=)): pinned "
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
    m.def("read_to_device",
          [](const py::object& spec_arg, const py::object& names_arg,
             const std::vector<std::pair<std::uintptr_t, std::size_t>>& dsts, int device, std::size_t staging_size,
             std::size_t staging_count, bool stand_in, std::optional<std::uint64_t> fail_copy_at,
             std::optional<std::uint64_t> cancel_at_copy, const py::object& progress, std::uintptr_t stream,
             bool trace) {
              const std::string spec = path_arg(spec_arg, "spec");
              const std::vector<std::string> names = tensor_names(names_arg);
              device_request q = device_request_of(dsts, device, staging_size, staging_count, stand_in);
              auto& spans = q.spans;
              auto& o = q.options;
              o.stand_in_fail_piece = fail_copy_at;
              o.stream = reinterpret_cast<void*>(stream);
              // The stand-in's steps, from its thread and this one (the call thread's, while the GIL is released).
              auto steps = std::make_shared<std::pair<std::mutex, std::vector<std::string>>>();
              if (trace)
                  o.stand_in_trace = [steps](const std::string& step) {
                      std::lock_guard lk(steps->first);
                      steps->second.push_back(step);
                  };
              device_read_stats stats;
              run_blocking(
                  [&](pending_call& pc) {
                      if (cancel_at_copy) {
                          if (!stand_in) raise(errc::InvalidArgument, "cancel_at_copy needs stand_in=True");
                          o.stand_in_before_copy = [&pc, at = *cancel_at_copy](std::uint64_t piece) {
                              if (piece == at) pc.cancel.store(true);
                          };
                      }
                      reader r = reader::open(spec);
                      stats = read_to_device(r, r.select(names), spans, o, pc.control());
                  },
                  progress, false);
              py::dict out;
              out["staged_bytes"] = stats.staged_bytes;
              out["direct_bytes"] = stats.direct_bytes;
              out["batches"] = stats.batches;
              out["copies"] = stats.copies;
              if (trace) {
                  std::lock_guard lk(steps->first);
                  out["trace"] = steps->second;
              }
              return out;
          },
          py::arg("spec"), py::arg("names"), py::arg("dsts"), py::arg("device") = 0,
          py::arg("staging_size") = std::size_t{16} << 20, py::arg("staging_count") = 4, py::arg("stand_in") = false,
          py::arg("fail_copy_at") = py::none(), py::arg("cancel_at_copy") = py::none(),
          py::arg("progress") = py::none(), py::arg("stream") = 0, py::arg("trace") = false,
          "Reads tensors `names` of `spec` into `dsts`, (address, size) per tensor, on CUDA device `device` "
          "through staging_count pinned buffers of staging_size bytes, ordered against the caller's CUDA "
          "`stream` (an int; 0 is the legacy default stream). stand_in=True copies into host memory "
          "instead (no CUDA); fail_copy_at=N makes its copy N fail, cancel_at_copy=N cancels at copy N, "
          "trace=True returns the stand-in's steps in order (tests). "
          "Returns {staged_bytes, direct_bytes, batches, copies[, trace]}. Unchecked raw addresses (tests).");
}

}  // namespace ringsafe::python
