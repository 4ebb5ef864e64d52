// ringsafe._ringsafe.convert: ringsafe::convert_file on a call thread with
// the GIL released (Ctrl-C cancels it: nothing is left at the target), its
// source opened with Reader's keyword options. ringsafe.convert and
// ringsafe.gguf.convert (ringsafe/_convert.py) are built on it; what it did
// comes back as a ConvertStats record.
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "blocking_call.hpp"
#include "reader_object.hpp"
#include "ringsafe/convert.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

dtype dequantize_arg(const std::string& name) {
    if (name == "F32") return dtype::F32;
    if (name == "F16") return dtype::F16;
    if (name == "BF16") return dtype::BF16;
    raise(errc::InvalidArgument, "convert: dtype is 'F32', 'F16' or 'BF16', got '" + name + "'");
}

std::uint64_t size_arg(const py::handle& v, const char* key, std::uint64_t lo, std::uint64_t hi) {
    return v.is_none() ? 0 : option_uint(v, "convert", key, lo, hi);
}

// What a conversion did, as ConvertStats hands it out (convert_result's fields,
// the files as str).
struct convert_stats_record {
    std::uint64_t bytes = 0, tensors = 0;
    py::list files;
    std::uint64_t buffers = 0, buffer_bytes = 0, readers = 0;
    double seconds = 0, write_waited = 0, read_waited = 0;
};

void bind_convert_stats(py::module_& m) {
    py::class_<convert_stats_record>(m, "ConvertStats",
                                     "What convert() did (read-only): bytes and tensors written, files (the paths "
                                     "written, in order), buffers and buffer_bytes (the pipeline's memory), "
                                     "readers, seconds, and the seconds write_waited and read_waited.")
        .def_readonly("bytes", &convert_stats_record::bytes)
        .def_readonly("tensors", &convert_stats_record::tensors)
        .def_readonly("files", &convert_stats_record::files)
        .def_readonly("buffers", &convert_stats_record::buffers)
        .def_readonly("buffer_bytes", &convert_stats_record::buffer_bytes)
        .def_readonly("readers", &convert_stats_record::readers)
        .def_readonly("seconds", &convert_stats_record::seconds)
        .def_readonly("write_waited", &convert_stats_record::write_waited)
        .def_readonly("read_waited", &convert_stats_record::read_waited)
        .def("__repr__", [](const convert_stats_record& c) {
            return "ConvertStats(" + std::to_string(c.tensors) + " tensors, " + std::to_string(c.bytes) + " bytes, " +
                   std::to_string(c.files.size()) + " files)";
        });
}

convert_stats_record convert(const py::object& source_arg, const py::object& target_arg, const py::object& select,
                  const std::string& dtype_name, const py::handle& max_shard_size, const py::handle& split_max_size,
                  const py::handle& split_max_tensors, const py::handle& buffer_size, const py::handle& buffers,
                  bool direct_write, bool sync, const py::object& progress, const py::kwargs& kw) {
    const std::string source = path_arg(source_arg, "source"), target = path_arg(target_arg, "target");
    auto o = std::make_shared<convert_options>();
    o->read = make_options(kw);
    if (!select.is_none()) o->select = tensor_names(select);
    o->dequantize_to = dequantize_arg(dtype_name);
    o->max_shard_size = size_arg(max_shard_size, "max_shard_size", 1, UINT64_MAX >> 1);
    o->split_max_size = size_arg(split_max_size, "split_max_size", 1, UINT64_MAX >> 1);
    o->split_max_tensors = size_arg(split_max_tensors, "split_max_tensors", 1, UINT64_MAX >> 1);
    o->buffer_size = option_uint(buffer_size, "convert", "buffer_size", convert_min_buffer, convert_max_buffer);
    o->buffers = option_uint(buffers, "convert", "buffers", 2, convert_max_buffers);
    o->direct = direct_write;
    o->sync = sync;
    auto res = std::make_shared<convert_result>();
    start_call([source, target, o, res](pending_call& pc) {
        *res = convert_file(source, target, *o, pc.control());
    })->wait(progress);
    py::list files;
    for (const auto& f : res->files) files.append(path_str(f));
    convert_stats_record out;
    out.bytes = res->bytes;
    out.tensors = res->tensors;
    out.files = files;
    out.buffers = res->buffers;
    out.buffer_bytes = res->buffer_bytes;
    out.readers = res->readers;
    out.seconds = res->seconds;
    out.write_waited = res->write_waited;
    out.read_waited = res->read_waited;
    return out;
}

}  // namespace

void bind_convert(py::module_& m) {
    bind_convert_stats(m);
    m.def("convert", &convert, py::arg("source"), py::arg("target"), py::kw_only(), py::arg("select") = py::none(),
          py::arg("dtype") = "F32", py::arg("max_shard_size") = py::none(), py::arg("split_max_size") = py::none(),
          py::arg("split_max_tensors") = py::none(), py::arg("buffer_size") = 64u << 20, py::arg("buffers") = 4,
          py::arg("direct_write") = true, py::arg("sync") = true, py::arg("progress") = py::none(),
          "Converts `source` (a path or URL, an index, a GGUF file or split set) into `target`, by its "
          "extension (.gguf: GGUF, else safetensors), as `ringsafe cp` does: select (globs), dtype of dequantized "
          "block tensors ('F32', 'F16', 'BF16'), max_shard_size (a sharded safetensors target), split_max_size / "
          "split_max_tensors (a split GGUF target), buffer_size and buffers (the pipeline's memory), direct_write (O_DIRECT writes), sync, "
          "progress(done, total); other keywords are Reader's options. GIL released; Ctrl-C cancels it and leaves "
          "nothing at the target. Returns a ConvertStats (bytes, tensors, files, buffers, buffer_bytes, readers, "
          "seconds, write_waited, read_waited).");
}

}  // namespace ringsafe::python
