// GGUF for Python (ringsafe.gguf builds on these): a GGUF reader's header
// (version, alignment, data offset, metadata values as gguf-py's
// ReaderField.contents() gives them), its tensor records with their ggml
// types, and whole tensors read as stored or dequantized as their reads land
// (read::read_dequantized), the GIL released and Ctrl-C watched. Header and
// tensors come out as records (GGUFHeader, GGUFMetadataEntry, GGUFTensorInfo).
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "blocking_call.hpp"
#include "read/dequantized_read.hpp"
#include "reader_object.hpp"
#include "ringsafe/ggml_type.hpp"
#include "ringsafe/gguf.hpp"

namespace py = pybind11;

namespace ringsafe::python {
namespace {

const gguf::header& header_of(const py_reader& self) {
    const gguf::header* h = self.get().gguf();
    if (!h) raise(errc::InvalidArgument, shown_spec(self.get().spec()) + " is not a GGUF file");
    return *h;
}

// A string as gguf-py decodes it (UTF-8); bytes that are not UTF-8 kept as
// surrogates (os.fsdecode's rule), so that no file's metadata is unreadable.
py::object text(std::string_view s) {
    PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
    if (!o) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(o);
}

py::object element(const gguf::metadata_entry& e, std::uint64_t i) {
    if (e.element_type == gguf::value_type::STRING) return text(e.string_at(i));
    return std::visit(
        [](const auto& v) -> py::object {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, bool>) return py::bool_(v);
            else if constexpr (std::is_same_v<T, double>) return py::float_(v);
            else if constexpr (std::is_same_v<T, std::string_view>) return text(v);
            else return py::int_(v);
        },
        e.value(i));
}

// A value as ReaderField.contents() gives it: a scalar as its Python value,
// an array as a list of them.
py::object contents(const gguf::metadata_entry& e) {
    if (!e.is_array()) return element(e, 0);
    py::list out(static_cast<py::ssize_t>(e.count));
    for (std::uint64_t i = 0; i < e.count; ++i) out[static_cast<py::size_t>(i)] = element(e, i);
    return out;
}

// One metadata entry of a GGUF header, as GGUFMetadataEntry hands it out:
// its key, value type and element type (an ARRAY's, else None), named as
// gguf-py's GGUFValueType, and its value as ReaderField.contents() gives it.
struct gguf_entry_record {
    py::object key;
    std::string type;
    py::object element_type;
    py::object value;
};

// A GGUF reader's header, as GGUFHeader hands it out: metadata in file order.
struct gguf_header_record {
    std::uint32_t version = 0;
    std::uint64_t alignment = 0;
    std::uint64_t data_offset = 0;
    py::list metadata;
};

// One tensor of a GGUF reader, as GGUFTensorInfo hands it out: its ggml type
// named, shape in PyTorch order, offset relative to its shard's data section.
struct gguf_tensor_record {
    py::object name;
    std::string type;
    py::tuple shape;
    std::uint64_t offset = 0;
    std::uint64_t nbytes = 0;
    std::uint32_t shard = 0;
};

gguf_header_record header_record_of(const py_reader& self) {
    const gguf::header& h = header_of(self);
    py::list md;
    for (const auto& e : h.metadata) {
        py::object element_type = e.is_array() ? py::object(py::str(std::string(gguf::value_type_name(e.element_type))))
                                               : py::object(py::none());
        md.append(gguf_entry_record{text(e.key), std::string(gguf::value_type_name(e.type)), element_type,
                                    contents(e)});
    }
    return {h.version, h.alignment, h.data_offset, md};
}

py::list tensor_records(const py_reader& self) {
    header_of(self);
    const reader& r = self.get();
    const auto ts = r.tensors();
    py::list out;
    for (std::uint32_t i = 0; i < ts.size(); ++i) {
        const tensor_info& t = ts[i];
        py::tuple shape(t.shape.size());
        for (std::size_t k = 0; k < t.shape.size(); ++k) shape[k] = py::int_(t.shape[k]);
        out.append(gguf_tensor_record{text(t.name), std::string(ggml_type_name(t.ggml)), shape, t.begin, t.size(),
                                      r.shard_of(i)});
    }
    return out;
}

// GGUFMetadataEntry, GGUFHeader and GGUFTensorInfo: read-only records.
void bind_gguf_records(py::module_& m) {
    py::class_<gguf_entry_record>(m, "GGUFMetadataEntry",
                                  "One metadata entry of a GGUF header (read-only): key, type and element_type "
                                  "(an ARRAY's, else None; named as gguf-py's GGUFValueType), and value (as "
                                  "gguf-py's ReaderField.contents() gives it).")
        .def_readonly("key", &gguf_entry_record::key)
        .def_readonly("type", &gguf_entry_record::type)
        .def_readonly("element_type", &gguf_entry_record::element_type)
        .def_readonly("value", &gguf_entry_record::value)
        .def("__repr__", [](const gguf_entry_record& e) {
            return "GGUFMetadataEntry(key=" + std::string(py::repr(e.key)) + ", type=" + e.type + ")";
        });
    py::class_<gguf_header_record>(m, "GGUFHeader",
                                   "A GGUF reader's header (read-only): version, alignment, data_offset and "
                                   "metadata (GGUFMetadataEntry records in file order).")
        .def_readonly("version", &gguf_header_record::version)
        .def_readonly("alignment", &gguf_header_record::alignment)
        .def_readonly("data_offset", &gguf_header_record::data_offset)
        .def_readonly("metadata", &gguf_header_record::metadata)
        .def("__repr__", [](const gguf_header_record& h) {
            return "GGUFHeader(version=" + std::to_string(h.version) + ", " + std::to_string(h.metadata.size()) +
                   " entries)";
        });
    py::class_<gguf_tensor_record>(m, "GGUFTensorInfo",
                                   "One tensor of a GGUF reader (read-only): name, type (named as gguf-py's "
                                   "GGMLQuantizationType), shape (PyTorch order: ggml's ne reversed), offset "
                                   "(relative to its shard's data section), nbytes and shard.")
        .def_readonly("name", &gguf_tensor_record::name)
        .def_readonly("type", &gguf_tensor_record::type)
        .def_readonly("shape", &gguf_tensor_record::shape)
        .def_readonly("offset", &gguf_tensor_record::offset)
        .def_readonly("nbytes", &gguf_tensor_record::nbytes)
        .def_readonly("shard", &gguf_tensor_record::shard)
        .def("__repr__", [](const gguf_tensor_record& t) {
            return "GGUFTensorInfo(name=" + std::string(py::repr(t.name)) + ", type=" + t.type + ")";
        });
}

std::optional<dtype> out_arg(const py::handle& v) {
    if (v.is_none()) return std::nullopt;
    const std::string name = v.cast<std::string>();
    const auto d = dtype_from_name(name);
    if (d && (*d == dtype::F32 || *d == dtype::F16 || *d == dtype::BF16)) return d;
    raise(errc::InvalidArgument, "gguf_read: an out dtype is 'F32', 'F16', 'BF16' or None, got '" + name + "'");
}

void gguf_read(const py_reader& self, const py::object& names_arg, const py::list& dsts, const py::list& outs,
               const py::handle& threads_arg, const py::handle& staging_arg, const py::object& progress) {
    header_of(self);
    const auto names = tensor_names(names_arg);
    if (dsts.size() != names.size() || outs.size() != names.size())
        raise(errc::InvalidArgument, "gguf_read: one destination and one out dtype per tensor are needed");
    auto r = self.r;
    std::vector<py::object> keep;
    auto targets = std::make_shared<std::vector<read::dequantized_target>>();
    std::uint64_t bytes = 0;
    for (std::size_t i = 0; i < names.size(); ++i) {
        const auto index = r->index_of(names[i]);
        if (!index) raise(errc::TensorNotFound, "tensor '" + names[i] + "' not found in " + shown_spec(r->spec()));
        targets->push_back({*index, writable_bytes(dsts[i], "the destination of '" + names[i] + "'", keep),
                            out_arg(outs[i])});
        bytes += r->tensors()[*index].size();
    }
    read::dequantized_read_options o;
    o.threads = static_cast<unsigned>(option_uint(threads_arg, "gguf_read", "threads", 0, 1024));
    if (!staging_arg.is_none()) o.staging_bytes = option_uint(staging_arg, "gguf_read", "staging_bytes", 1, UINT64_MAX >> 1);
    run_blocking([r, targets, o](pending_call& pc) { read::read_dequantized(*r, *targets, o, pc.control()); },
                 progress, !self.remote && bytes < inline_job_bytes);
}

}  // namespace

void bind_gguf(py::module_& m) {
    bind_gguf_records(m);
    m.def("gguf_header", &header_record_of, py::arg("reader"),
          "The GGUFHeader of a GGUF reader (a split set's first part): version, alignment, data_offset, and "
          "metadata as GGUFMetadataEntry records (key, type, element_type or None, value) in file order, types named as gguf-py's GGUFValueType, "
          "values as gguf-py's ReaderField.contents() gives them (strings decoded as UTF-8, other bytes kept "
          "as surrogates). InvalidArgument for a safetensors reader.");
    m.def("gguf_tensors", &tensor_records, py::arg("reader"),
          "Every tensor of a GGUF reader in data order, as GGUFTensorInfo records (name, type, shape, offset, "
          "nbytes, shard): type "
          "named as gguf-py's GGMLQuantizationType, shape in PyTorch order (ggml's ne reversed), offset "
          "relative to its shard's data section.");
    m.def("gguf_read", &gguf_read, py::arg("reader"), py::arg("names"), py::arg("dsts"), py::arg("outs"),
          py::kw_only(), py::arg("threads") = 0, py::arg("staging_bytes") = py::none(), py::arg("progress") = py::none(),
          "Reads whole tensors `names` into writable C-contiguous buffers `dsts`, each as stored (out None) or "
          "dequantized to out ('F32', 'F16', 'BF16') while later reads are in flight; GIL released, Ctrl-C "
          "cancels it. threads: dequantizing threads (0 = one per CPU); staging_bytes: raw blocks read per batch "
          "(None: 256 MiB; two batches are held at most). Everything is checked before any I/O.");
}

}  // namespace ringsafe::python
