// dequantize and can_dequantize: ggml's block types to float32/16 and
// bfloat16 for Python (ringsafe.gguf builds on them), through the engine's
// dequantize_queue with the GIL released and Ctrl-C watched.
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "ringsafe/dequantize.hpp"

namespace py = pybind11;

namespace ringsafe::python {
namespace {

ggml_type type_arg(const std::string& name) {
    if (auto t = ggml_type_from_name(name)) return *t;
    raise(errc::InvalidArgument, "dequantize: unknown ggml type '" + name + "' (types are named as gguf-py's "
                                 "GGMLQuantizationType: 'Q4_K', 'Q8_0', 'BF16', ...)");
}

dtype out_arg(const std::string& name) {
    auto d = dtype_from_name(name);
    if (d && (*d == dtype::F32 || *d == dtype::F16 || *d == dtype::BF16)) return *d;
    raise(errc::InvalidArgument, "dequantize: out_dtype must be 'F32', 'F16' or 'BF16', got '" + name + "'");
}

// Output bytes of the conversion; raises its error (named type, whole blocks,
// ...) when there is none, by asking the engine to check it with no destination.
std::uint64_t output_bytes(ggml_type t, std::span<const std::byte> src, dtype out) {
    const auto n = dequantized_elements(t, src.size());
    if (!n || !can_dequantize(t)) dequantize(t, src, out, {}, 1);  // throws the engine's message
    return *n * (out == dtype::F32 ? 4 : 2);
}

// Dequantizes into dst, the GIL released; a signal handler that raises
// (Ctrl-C) cancels the rest, waits for the running pieces and propagates.
// Tensors under 1 MiB of output run on the caller (no thread hand-off; done
// within about a millisecond, so Ctrl-C is seen on return).
void run(ggml_type t, std::span<const std::byte> src, dtype out, std::span<std::byte> dst, unsigned threads) {
    using namespace std::chrono_literals;
    if (dst.size() <= (1u << 20)) {
        py::gil_scoped_release nogil;
        dequantize(t, src, out, dst, 1);
        return;
    }
    dequantize_queue q(threads);
    q.submit({t, src, out, dst, {}, {}});
    for (;;) {
        bool done;
        {
            py::gil_scoped_release nogil;
            done = q.wait_for(50ms);
        }
        if (done) return;
        if (PyErr_CheckSignals() != 0) {
            py::error_already_set raised;
            {
                py::gil_scoped_release nogil;
                q.cancel();
                q.wait();
            }
            throw raised;
        }
    }
}

py::object dequantize_py(const std::string& type_name, const py::handle& data, const std::string& out_dtype,
                         const py::handle& out, const py::handle& threads_arg) {
    const ggml_type t = type_arg(type_name);
    const dtype o = out_arg(out_dtype);
    const auto threads = static_cast<unsigned>(option_uint(threads_arg, "dequantize", "threads", 0, 1024));
    py::object hold;
    const auto src = readable_bytes(data, "dequantize's data", hold);
    const std::uint64_t n = output_bytes(t, src, o);
    if (out.is_none()) {
        auto result = py::reinterpret_steal<py::bytes>(PyBytes_FromStringAndSize(nullptr, py::ssize_t(n)));
        if (!result) throw py::error_already_set();
        run(t, src, o, {reinterpret_cast<std::byte*>(PyBytes_AS_STRING(result.ptr())), n}, threads);
        return result;
    }
    std::vector<py::object> keep;
    const auto dst = writable_bytes(out, "dequantize's out", keep);
    if (dst.size() < n) dequantize(t, src, o, dst, 1);  // throws BufferTooSmall, naming both sizes
    run(t, src, o, dst.first(n), threads);
    return py::int_(n);
}

}  // namespace

void bind_dequantize(py::module_& m) {
    m.def("dequantize", &dequantize_py, py::arg("type_name"), py::arg("data"), py::arg("out_dtype") = "F32",
          py::kw_only(), py::arg("out") = py::none(), py::arg("threads") = 0,
          "Dequantizes `data` (whole blocks of ggml type `type_name`, named as gguf-py's GGMLQuantizationType) to "
          "`out_dtype` ('F32', 'F16' or 'BF16'), little-endian, ne[0] fastest. Returns the bytes, or with `out` "
          "(a writable C-contiguous buffer of at least that size) writes them there and returns their count. "
          "float32 values are bit-exact with gguf-py's; F16/BF16 round them to nearest even. `threads`: at most "
          "that many threads (0 = one per CPU). SafetensorError (InvalidArgument, BufferTooSmall) names the "
          "problem; Ctrl-C stops it.");
    m.def("can_dequantize", [](const std::string& type_name) {
              const auto t = ggml_type_from_name(type_name);
              return t.has_value() && can_dequantize(*t);
          },
          py::arg("type_name"), "True when dequantize() takes ggml type `type_name` (an unknown name: False).");
}

}  // namespace ringsafe::python
