// ringsafe/device.hpp for Python: whether a CUDA runtime loads (CudaRuntime), the
// DeviceStager kept across device reads, and the device reads of a Reader's
// tensors (read_to_device_at, and _stand_in_read_with_hooks, the host
// stand-in's test hooks kept out of it).
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "blocking_call.hpp"
#include "device/staged_read.hpp"
#include "reader_object.hpp"
#include "ringsafe/device.hpp"
#include "ringsafe/error.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

// The arguments both device reads take, as ringsafe/device.hpp's types.
struct device_request {
    std::vector<device_span> spans;
    device_options options;
};

// The destinations `dsts` of `call`, MemorySpan records or (address, size)
// tuples (arguments.cpp reads either), checked later by read_to_device().
std::vector<device_span> device_spans(const py::sequence& dsts, const char* call) {
    std::vector<device_span> out;
    out.reserve(dsts.size());
    for (const auto d : dsts) {
        const auto s = memory_span(d, call);
        out.push_back({s.data(), s.size()});
    }
    return out;
}

// The destinations and the staging options.
device_request device_request_of(std::vector<device_span> spans, int device, std::size_t staging_size,
                                 std::size_t staging_count, bool stand_in) {
    device_request q;
    q.spans = std::move(spans);
    q.options.device = device;
    q.options.staging_size = staging_size;
    q.options.staging_count = staging_count;
    q.options.stand_in = stand_in;
    return q;
}

// A device read of `names` into (address, size) `dsts` on a call thread, the
// GIL released, waited for even on Ctrl-C (cancelled first: no copy lands
// after the destinations go): through `stager`'s ring when given, else one
// made for this call. Returns {staged_bytes, direct_bytes, batches, copies}.
// `hooks` (tests only, with the stand-in): the stand-in's test hooks, and
// `cancel_at_copy` cancels the call at that copy.
py::dict device_read(const py_reader& self, const py::object& names_arg, device_request q,
                     std::shared_ptr<device_stager> stager, const py::object& progress,
                     std::optional<device::stand_in_hooks> hooks = std::nullopt,
                     std::optional<std::uint64_t> cancel_at_copy = std::nullopt) {
    auto r = self.r;
    self.get();
    auto names = tensor_names(names_arg);
    if (stager && (stager->options().device != q.options.device || stager->options().stand_in != q.options.stand_in))
        raise(errc::InvalidArgument,
              "read_to_device: the stager is for " +
                  (stager->options().stand_in ? std::string("the host stand-in")
                                              : "CUDA device " + std::to_string(stager->options().device)) +
                  ", the call for " +
                  (q.options.stand_in ? std::string("the host stand-in")
                                      : "CUDA device " + std::to_string(q.options.device)));
    auto stats = std::make_shared<device_read_stats>();
    run_blocking(
        [r, names, q, stager, hooks, cancel_at_copy, stats](pending_call& pc) mutable {
            if (hooks) {
                if (cancel_at_copy)
                    hooks->before_copy = [&pc, at = *cancel_at_copy](std::uint64_t piece) {
                        if (piece == at) pc.cancel.store(true);
                    };
                *stats = device::read_with_stand_in_hooks(*r, r->select(names), q.spans, q.options, pc.control(),
                                                          std::move(*hooks));
            } else {
                *stats = stager ? stager->read(*r, r->select(names), q.spans, pc.control(), q.options.stream)
                                : read_to_device(*r, r->select(names), q.spans, q.options, pc.control());
            }
        },
        progress, false);
    py::dict out;
    out["staged_bytes"] = stats->staged_bytes;
    out["direct_bytes"] = stats->direct_bytes;
    out["batches"] = stats->batches;
    out["copies"] = stats->copies;
    return out;
}

// Whether the CUDA runtime loads, as CudaRuntime hands it out.
struct cuda_runtime_record {
    bool available = false;
    std::string reason;  // '' when available
};

// read_to_device_at, and the stand-in's test hooks kept out of it.
void bind_device_reads(py::module_& m) {
    m.def("read_to_device_at",
          [](const py_reader& self, const py::object& names, const py::sequence& dsts, int device, bool stand_in,
             std::size_t staging_size, std::size_t staging_count, const py::object& progress,
             std::shared_ptr<device_stager> stager, std::uintptr_t stream) {
              device_request q = device_request_of(device_spans(dsts, "read_to_device_at"), device, staging_size,
                                                   staging_count, stand_in);
              q.options.stream = reinterpret_cast<void*>(stream);
              return device_read(self, names, std::move(q), std::move(stager), progress);
          },
          py::arg("reader"), py::arg("names"), py::arg("dsts"), py::arg("device") = 0, py::arg("stand_in") = false,
          py::arg("staging_size") = std::size_t{16} << 20, py::arg("staging_count") = 4,
          py::arg("progress") = py::none(), py::arg("stager") = py::none(), py::arg("stream") = 0,
          "Reads tensors `names` into device memory `dsts`, a MemorySpan record (address, size) per tensor, "
          "or an (address, size) tuple (also accepted), on CUDA device "
          "`device`, through pinned staging buffers, GIL released; Ctrl-C cancels it. stream: the caller's "
          "cudaStream_t as an int (torch.cuda.current_stream().cuda_stream; 0 is the legacy default stream): "
          "the copies wait for the work queued on it, and it waits for the copies. stand_in=True: the "
          "destinations are host memory playing the device (no CUDA). stager: a DeviceStager for the same "
          "device and stand_in whose ring (and staging sizes) are used instead, kept across calls. "
          "Returns {staged_bytes, direct_bytes, batches, copies}. Unchecked: the caller guarantees the memory.");
    m.def("_stand_in_read_with_hooks",
          [](const py_reader& self, const py::object& names, const py::sequence& dsts, std::size_t staging_size,
             std::size_t staging_count, std::optional<std::uint64_t> fail_copy_at,
             std::optional<std::uint64_t> cancel_at_copy, std::uintptr_t stream) {
              device_request q = device_request_of(device_spans(dsts, "_stand_in_read_with_hooks"), 0, staging_size,
                                                   staging_count, true);
              q.options.stream = reinterpret_cast<void*>(stream);
              device::stand_in_hooks hooks;
              hooks.fail_piece = fail_copy_at;
              // The stand-in's steps, from its thread and this one (the call thread's, while the GIL is released).
              auto steps = std::make_shared<std::pair<std::mutex, std::vector<std::string>>>();
              hooks.trace = [steps](const std::string& step) {
                  std::lock_guard lk(steps->first);
                  steps->second.push_back(step);
              };
              py::dict out = device_read(self, names, std::move(q), nullptr, py::none(), std::move(hooks),
                                         cancel_at_copy);
              std::lock_guard lk(steps->first);
              out["trace"] = steps->second;
              return out;
          },
          py::arg("reader"), py::arg("names"), py::arg("dsts"), py::kw_only(), py::arg("staging_size") = 4096,
          py::arg("staging_count") = 2, py::arg("fail_copy_at") = py::none(), py::arg("cancel_at_copy") = py::none(),
          py::arg("stream") = 0,
          "Tests only, not an API: read_to_device_at with the host stand-in and its hooks (fail_copy_at=N: "
          "copy N fails; cancel_at_copy=N: cancelled at copy N); the result adds `trace`, the stand-in's steps.");
}

}  // namespace

void bind_device(py::module_& m) {
    py::class_<cuda_runtime_record>(m, "CudaRuntime",
                                    "Whether the CUDA runtime can be loaded (read-only): available, and reason "
                                    "('' when it can, else why not).")
        .def_readonly("available", &cuda_runtime_record::available)
        .def_readonly("reason", &cuda_runtime_record::reason)
        .def("__repr__", [](const cuda_runtime_record& c) {
            return "CudaRuntime(available=" + std::string(c.available ? "True" : "False") + ", reason=" +
                   std::string(py::repr(py::str(c.reason))) + ")";
        });
    m.def("cuda_runtime_available", [] {
              cuda_runtime_record out;
              out.available = cuda_runtime_available(&out.reason);
              return out;
          },
          "A CudaRuntime: available True (reason '') when the CUDA runtime can be loaded, else False and the "
          "reason.");
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
    bind_device_reads(m);
}

}  // namespace ringsafe::python
