// TensorInfo, the record every header listing hands out, ShardInfo, the Reader's record of each shard,
// FileStat, what a shard's or a mapping's file was when opened, and header parsing for bytes held in
// Python (ParsedHeader records): a whole file in memory (load(), deserialize()) or a header read piecewise
// from a Python file object.
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "arguments.hpp"
#include "bindings.hpp"
#include "header_objects.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/header.hpp"
#include "ringsafe/selection.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

// A header parsed from bytes held in Python, as ParsedHeader hands it out:
// tensors as TensorInfo records (shard 0) in data order, __metadata__ as a dict
// or None, and data_start (8 + N).
struct parsed_header_record {
    py::list tensors;
    py::object metadata;
    std::uint64_t data_start = 0;
};

// Equality, hash and pickling of a read-only record by its state tuple
// (`state`): == compares states (NotImplemented for another type), hash() hashes
// the state, and pickle stores it; `rebuild` makes the record from a state of
// `fields` items (a ValueError saying `layout` for another length).
template <class Record, class State, class Rebuild>
void def_compared_by_state(py::class_<Record>& cls, State state, Rebuild rebuild, std::size_t fields,
                           const char* layout) {
    cls.def("__eq__",
            [state](const Record& a, const py::object& b) -> py::object {
                if (!py::isinstance<Record>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
                return py::bool_(state(a).equal(state(b.cast<const Record&>())));
            })
        .def("__hash__", [state](const Record& r) { return py::hash(state(r)); })
        .def(py::pickle(state, [rebuild, fields, layout](const py::tuple& s) {
            if (s.size() != fields) throw py::value_error(layout);
            return rebuild(s);
        }));
}

parsed_header_record header_record(const header& h) {
    py::list tensors;
    for (const auto& t : h.tensors) tensors.append(tensor_object(t, 0));
    return {std::move(tensors), metadata_object(h.metadata), h.data_start()};
}

void bind_parsed_header(py::module_& m) {
    py::class_<parsed_header_record>(m, "ParsedHeader",
                                     "A header parsed from bytes (read-only): tensors (TensorInfo records in data "
                                     "order), metadata (__metadata__ as a dict of str, or None) and data_start "
                                     "(where the data section begins: 8 + the header's length).")
        .def_readonly("tensors", &parsed_header_record::tensors)
        .def_readonly("metadata", &parsed_header_record::metadata)
        .def_readonly("data_start", &parsed_header_record::data_start)
        .def("__repr__", [](const parsed_header_record& h) {
            return "ParsedHeader(" + std::to_string(h.tensors.size()) + " tensors, data_start=" +
                   std::to_string(h.data_start) + ")";
        });
}

parse_options limited_to(std::uint64_t max_header_size) {
    parse_options o;
    o.max_header_size = max_header_size;
    return o;
}

py::tuple record_state(const tensor_record& t) {
    return py::make_tuple(t.name, t.dtype, t.shape, t.begin, t.end, t.shard);
}

std::string record_repr(const tensor_record& t) {
    std::string shape = py::str(t.shape);
    return "TensorInfo(name=" + std::string(py::repr(py::str(t.name))) + ", dtype='" + t.dtype + "', shape=" + shape +
           ", begin=" + std::to_string(t.begin) + ", end=" + std::to_string(t.end) +
           ", shard=" + std::to_string(t.shard) + ")";
}

void bind_tensor_info(py::module_& m) {
    py::class_<tensor_record> cls(m, "TensorInfo",
                              "One tensor of a checkpoint's header (read-only): name, dtype (the safetensors "
                              "code, e.g. 'F32'), shape (a tuple), begin and end (offsets in its shard's data "
                              "section), nbytes (end - begin) and shard (its shard's index, 0 unsharded).");
    cls.def(py::init([](std::string name, std::string dtype, const py::iterable& shape, std::uint64_t begin,
                         std::uint64_t end, std::uint32_t shard) {
                 if (end < begin)
                     raise(errc::InvalidArgument, "TensorInfo '" + name + "': end " + std::to_string(end) +
                                                      " is before begin " + std::to_string(begin));
                 py::list dims;
                 for (auto d : shape) dims.append(py::int_(d.cast<std::uint64_t>()));
                 return tensor_record{std::move(name), std::move(dtype), py::tuple(dims), begin, end, shard};
             }),
             py::kw_only(), py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("begin"), py::arg("end"),
             py::arg("shard") = 0, "A record made by hand (tests, planners); the engine's come from headers.")
        .def_readonly("name", &tensor_record::name)
        .def_readonly("dtype", &tensor_record::dtype)
        .def_readonly("shape", &tensor_record::shape)
        .def_readonly("begin", &tensor_record::begin)
        .def_readonly("end", &tensor_record::end)
        .def_property_readonly("nbytes", [](const tensor_record& t) { return t.end - t.begin; })
        .def_readonly("shard", &tensor_record::shard)
        .def("__repr__", &record_repr);
    def_compared_by_state(cls, &record_state, [](const py::tuple& s) {
        return tensor_record{s[0].cast<std::string>(), s[1].cast<std::string>(), py::tuple(s[2]),
                             s[3].cast<std::uint64_t>(), s[4].cast<std::uint64_t>(), s[5].cast<std::uint32_t>()};
    }, 6, "TensorInfo state is (name, dtype, shape, begin, end, shard)");
}

py::tuple stat_state(const file_stat_record& s) { return py::make_tuple(s.device, s.inode, s.size, s.mtime_ns); }

std::string stat_repr(const file_stat_record& s) {
    return "FileStat(device=" + std::to_string(s.device) + ", inode=" + std::to_string(s.inode) +
           ", size=" + std::to_string(s.size) + ", mtime_ns=" + std::to_string(s.mtime_ns) + ")";
}

void bind_file_stat(py::module_& m) {
    py::class_<file_stat_record> cls(m, "FileStat",
                                 "What a file was when it was opened (read-only): device and inode (st_dev, st_ino: "
                                 "which file), size (its bytes) and mtime_ns (st_mtime_ns: a rewrite in place "
                                 "changes it). A URL's has device, inode and mtime_ns 0.");
    cls.def(py::init([](std::uint64_t device, std::uint64_t inode, std::uint64_t size, std::int64_t mtime_ns) {
                 return file_stat_record{device, inode, size, mtime_ns};
             }),
             py::kw_only(), py::arg("device"), py::arg("inode"), py::arg("size"), py::arg("mtime_ns"),
             "A record made by hand (tests); the engine's come from ShardInfo.stat and MappedFile.stat.")
        .def_readonly("device", &file_stat_record::device)
        .def_readonly("inode", &file_stat_record::inode)
        .def_readonly("size", &file_stat_record::size)
        .def_readonly("mtime_ns", &file_stat_record::mtime_ns)
        .def("same_file",
             [](const file_stat_record& a, const file_stat_record& b) {
                 return a.device == b.device && a.inode == b.inode;
             },
             py::arg("other"),
             "Whether `other` is of the same file (device and inode), whatever its size and time now.")
        .def("__repr__", &stat_repr);
    def_compared_by_state(cls, &stat_state, [](const py::tuple& s) {
        return file_stat_record{s[0].cast<std::uint64_t>(), s[1].cast<std::uint64_t>(), s[2].cast<std::uint64_t>(),
                                s[3].cast<std::int64_t>()};
    }, 4, "FileStat state is (device, inode, size, mtime_ns)");
}

py::tuple shard_state(const shard_record& s) {
    return py::make_tuple(s.spec, s.size, s.data_start, py::cast(s.stat));
}

// The spec a person may see (shown_spec): a URL without its signing values.
py::str shown_shard_spec(const shard_record& s) { return path_str(shown_spec(path_arg(s.spec, "spec"))); }

std::string shard_repr(const shard_record& s) {
    return "ShardInfo(spec=" + std::string(py::repr(shown_shard_spec(s))) + ", size=" + std::to_string(s.size) +
           ", data_start=" + std::to_string(s.data_start) + ", stat=" + stat_repr(s.stat) + ")";
}

// A record made by hand: data_start within the file, stat (default: a URL's,
// no identity) of the same size.
shard_record checked_shard(py::str spec, std::uint64_t size, std::uint64_t data_start,
                           const std::optional<file_stat_record>& stat) {
    if (data_start < 8 || data_start > size)
        raise(errc::InvalidArgument, "ShardInfo " + std::string(py::repr(spec)) + ": data_start " +
                                         std::to_string(data_start) + " is not between 8 and its size " +
                                         std::to_string(size));
    if (stat && stat->size != size)
        raise(errc::InvalidArgument, "ShardInfo " + std::string(py::repr(spec)) + ": its stat's size " +
                                         std::to_string(stat->size) + " is not its size " + std::to_string(size));
    return shard_record{std::move(spec), size, data_start, stat.value_or(file_stat_record{0, 0, size, 0})};
}

void bind_shard_info(py::module_& m) {
    py::class_<shard_record> cls(m, "ShardInfo",
                             "One shard of an open checkpoint (read-only): spec (its resolved path or URL; an "
                             "hf:// one names the commit read; a URL's signing values written '...'), raw_spec "
                             "(the same with them), size (its bytes), data_start (where its data section "
                             "begins: 8 + the header's length) and stat (a FileStat: the file as the reader "
                             "opened it). repr() and str() show spec.");
    cls.def(py::init(&checked_shard), py::kw_only(), py::arg("spec"), py::arg("size"), py::arg("data_start"),
             py::arg("stat") = py::none(),
             "A record made by hand (tests, planners); the engine's come from Reader.shards().")
        .def_property_readonly("spec", &shown_shard_spec,
                               "Its path or URL as a person may see it: a URL's signing query values (a presigned "
                               "or SAS URL's) written '...', as every error message writes them.")
        .def_readonly("raw_spec", &shard_record::spec,
                      "Its path or URL as the engine opened it, signing values included: a credential, for code "
                      "that passes it on; never log it.")
        .def_readonly("size", &shard_record::size)
        .def_readonly("data_start", &shard_record::data_start)
        .def_readonly("stat", &shard_record::stat,
                      "The file as the reader opened it (which file, its size and modification time); a URL's "
                      "names no file (device, inode and mtime_ns 0).")
        .def("__repr__", &shard_repr);
    def_compared_by_state(cls, &shard_state, [](const py::tuple& s) {
        return checked_shard(s[0].cast<py::str>(), s[1].cast<std::uint64_t>(), s[2].cast<std::uint64_t>(),
                             s[3].cast<file_stat_record>());
    }, 4, "ShardInfo state is (spec, size, data_start, stat)");
}

}  // namespace

void bind_header(py::module_& m) {
    bind_tensor_info(m);
    bind_file_stat(m);
    bind_shard_info(m);
    bind_parsed_header(m);
    m.def("parse_bytes",
          [](const py::object& data) {
              py::object hold;  // the export, held while the bytes are parsed
              const auto bytes = readable_bytes(data, "data", hold);
              return header_record(parse_file(bytes));
          },
          py::arg("data"),
          "Parses and validates a whole file held in a C-contiguous bytes-like object (TypeError for a "
          "strided or reversed view): a ParsedHeader (tensors, metadata, data_start).");
    m.def("parse_prefix",
          [](const py::bytes& prefix, std::uint64_t file_size, std::uint64_t max_header_size) {
              std::string_view v = prefix;
              return parse_length_prefix({reinterpret_cast<const std::byte*>(v.data()), v.size()}, file_size,
                                         limited_to(max_header_size));
          },
          py::arg("prefix"), py::arg("file_size"), py::arg("max_header_size") = default_max_header_size,
          "The header length N from the file's first 8 bytes, checked against the file's size.");
    m.def("parse_header",
          [](const py::bytes& json, std::uint64_t file_size, std::uint64_t max_header_size) {
              return header_record(parse_header(std::string_view(json), file_size, limited_to(max_header_size)));
          },
          py::arg("json"), py::arg("file_size"), py::arg("max_header_size") = default_max_header_size,
          "Parses and validates the N header bytes of a file of `file_size` bytes: a ParsedHeader (tensors, "
          "metadata, data_start).");
    m.def("glob_match", [](std::string_view pattern, std::string_view name) { return glob_match(pattern, name); },
          py::arg("pattern"), py::arg("name"),
          "The engine's glob rule (fnmatch without flags, on UTF-8 code points, \\ escapes), for sources "
          "without a Reader.");
}

}  // namespace ringsafe::python
