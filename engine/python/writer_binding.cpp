// Writing from Python: the streaming writer (StreamWriter), a whole dict of
// tensors through the declared writer (save_declared: the reference's exact
// bytes, written straight from the tensors' memory by several threads), and
// serialize() into a bytes object. The GIL is released around every write;
// a StreamWriter's calls run one at a time (a second thread waits its turn).
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "arguments.hpp"
#include "blocking_call.hpp"
#include "bindings.hpp"
#include "ringsafe/writer.hpp"
#include "writer_stats_object.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

// One tensor handed over from Python (a DescribedTensor: name, dtype, shape, address, nbytes).
struct tensor_source {
    tensor_entry entry;
    const std::byte* data = nullptr;
    std::uint64_t size = 0;
};

dtype parse_dtype(const std::string& name, const std::string& tensor) {
    auto t = dtype_from_name(name);
    if (!t) raise(errc::InvalidArgument, "tensor '" + tensor + "': unknown dtype '" + name + "'");
    return *t;
}

std::vector<std::uint64_t> parse_shape(const py::handle& shape, const std::string& tensor) {
    if (PyUnicode_Check(shape.ptr()) || !PySequence_Check(shape.ptr()))
        throw py::type_error("tensor '" + tensor + "': the shape must be a sequence of int");
    std::vector<std::uint64_t> out;
    for (auto d : shape) {
        const auto x = index_int(d);
        if (!x)
            throw py::type_error("tensor '" + tensor + "': the shape must be a sequence of int, not of " +
                                 std::string(py::str(py::type::handle_of(d).attr("__name__"))));
        if (x->overflow != 0 || x->value < 0)
            raise(errc::InvalidArgument, "tensor '" + tensor + "': dimension " + std::string(py::str(d)) +
                                             (x->overflow > 0 ? " is too large" : " is negative"));
        out.push_back(static_cast<std::uint64_t>(x->value));
    }
    return out;
}

// A metadata str as UTF-8, named when it cannot be encoded.
std::string metadata_text(const py::handle& v) {
    auto text = utf8_of(v);
    if (!text)
        raise(errc::InvalidArgument, "metadata " + ascii_of(v) + " cannot be encoded as UTF-8 (it holds a lone surrogate)");
    return std::move(*text);
}

std::optional<metadata_map> parse_metadata(const py::object& md) {
    if (md.is_none()) return std::nullopt;
    // The words of ringsafe._serialize.check_metadata, the package's check.
    if (!py::isinstance<py::dict>(md))
        throw py::type_error("metadata must be a dict of str to str, got " +
                             std::string(py::str(py::type::handle_of(md).attr("__name__"))));
    metadata_map out;
    for (auto [k, v] : md.cast<py::dict>()) {
        if (!py::isinstance<py::str>(k) || !py::isinstance<py::str>(v))
            throw py::type_error("metadata must map str to str: " + std::string(py::repr(k)) + ": " +
                                 std::string(py::repr(v)));
        out.emplace(metadata_text(k), metadata_text(v));
    }
    return out;
}

// Reads the Python list of DescribedTensor records (fields read by name), checks each size against shape x dtype, and orders
// the tensors as the reference writer does (dtype descending, then name),
// with their data offsets.
std::vector<tensor_source> parse_tensors(const py::list& tensors) {
    std::vector<tensor_source> out;
    out.reserve(tensors.size());
    // The field names made once per call, not once per tensor.
    const py::str name_f("name"), dtype_f("dtype"), shape_f("shape"), address_f("address"), nbytes_f("nbytes");
    for (auto item : tensors) {
        tensor_source s;
        s.entry.name = tensor_name(item.attr(name_f));
        s.entry.dtype = parse_dtype(item.attr(dtype_f).cast<std::string>(), s.entry.name);
        s.entry.shape = parse_shape(item.attr(shape_f), s.entry.name);
        s.data = reinterpret_cast<const std::byte*>(item.attr(address_f).cast<std::uintptr_t>());
        s.size = item.attr(nbytes_f).cast<std::uint64_t>();
        std::uint64_t elements = 1;
        bool overflow = false;
        for (auto d : s.entry.shape) overflow |= __builtin_mul_overflow(elements, d, &elements);
        auto bytes = overflow ? std::nullopt : dtype_bytes_for(s.entry.dtype, elements);
        if (!bytes)
            raise(errc::ValidationOverflow, "tensor '" + s.entry.name + "': its size in bytes is not a whole number or overflows");
        if (*bytes != s.size)
            raise(errc::TensorInvalidInfo, "tensor '" + s.entry.name + "': " + std::to_string(s.size) +
                                               " bytes given, its shape and dtype need " + std::to_string(*bytes));
        out.push_back(std::move(s));
    }
    std::stable_sort(out.begin(), out.end(), [](const tensor_source& a, const tensor_source& b) {
        return reference_writer_order(a.entry, b.entry);
    });
    std::uint64_t off = 0;
    for (auto& s : out) {
        s.entry.begin = off;
        off += s.size;
        s.entry.end = off;
    }
    return out;
}

// A writer that one thread at a time may call: every call takes `m` with the
// GIL released (a second thread waits its turn, never while holding the GIL,
// so the first can take the GIL back), so finish() or abandon() on one thread
// cannot reset the writer under an add() running on another.
struct py_writer {
    std::optional<writer> w;
    std::mutex m;

    explicit py_writer(writer x) : w(std::move(x)) {}
    std::unique_lock<std::mutex> lock() {
        py::gil_scoped_release nogil;
        return std::unique_lock(m);
    }
    writer& get() {
        if (!w) raise(errc::WriterState, "the writer is closed (finished or abandoned)");
        return *w;
    }
};

writer_options make_writer_options(const py::dict& kw) {
    writer_options o;
    for (auto [k, v] : kw) {
        std::string key = k.cast<std::string>();
        if (v.is_none()) continue;
        if (key == "reserve_bytes") o.reserve_bytes = option_uint(v, "writer", key, 0, UINT64_MAX >> 1);
        else if (key == "expected_tensors") o.expected_tensors = option_uint(v, "writer", key, 0, UINT64_MAX >> 1);
        else if (key == "direct") o.direct = option_bool(v, "writer", key);
        else if (key == "sync") o.sync = o.sync_dir = option_bool(v, "writer", key);
        else if (key == "strict_reservation") o.strict_reservation = option_bool(v, "writer", key);
        else raise(errc::InvalidArgument, "unknown writer option '" + key + "'");
    }
    return o;
}

// save_declared: a whole dict written straight from the tensors' memory.
void bind_save_declared(py::module_& m) {
    m.def("save_declared",
          [](const py::object& path_arg_, const py::list& tensors, const py::object& metadata, bool sync,
             unsigned threads, const py::object& progress) {
              const std::string path = path_arg(path_arg_, "path");
              auto ts = parse_tensors(tensors);
              auto md = parse_metadata(metadata);
              std::uint64_t total = 0;
              for (const auto& t : ts) total += t.size;
              // The data first, with progress reports (the last one says done == total);
              // the file is published only after that report returned: a callback that
              // raises leaves the target path as it was.
              std::optional<declared_writer> w;
              auto job = [&](pending_call& pc, unsigned writers) {
                  std::vector<tensor_decl> decls;
                  for (const auto& t : ts) decls.push_back({t.entry.name, t.entry.dtype, t.entry.shape});
                  declared_options o;
                  o.sync = o.sync_dir = sync;
                  w.emplace(path, std::move(decls), md ? &*md : nullptr, o);
                  std::vector<std::span<const std::byte>> data;
                  for (const auto& t : ts) data.emplace_back(t.data, t.size);
                  // Durable (sync): O_DIRECT, the bytes go to the disk at once instead of
                  // waiting in the page cache for the fsync.
                  w->write_all(data, writers, sync, pc.control());
              };
              if (sync) {
                  run_blocking([&](pending_call& pc) { job(pc, threads); }, progress, total < inline_job_bytes);
              } else {
                  // Buffered: one writer, on this thread. The kernel takes a file's buffered
                  // writes one at a time (its inode lock), so a second writer only spins; and
                  // a new thread may run on another CPU, whose free page lists lack the
                  // memory this process freed (on a VM with free page reporting, fresh pages
                  // there cost a host fault each: 1.3-2.2 s instead of 0.25-0.4 s per GB).
                  run_on_caller([&](pending_call& pc) { job(pc, 1); }, progress);
              }
              py::gil_scoped_release nogil;
              w->finish();
          },
          py::arg("path"), py::arg("tensors"), py::arg("metadata") = py::none(), py::arg("sync") = true,
          py::arg("threads") = 2, py::arg("progress") = py::none(),
          "Writes DescribedTensor records (name, dtype, shape, address, nbytes) to `path` in the reference's "
          "layout, straight from their memory; published atomically (temporary + rename). sync: O_DIRECT with "
          "`threads` writers, then fsync; otherwise buffered writes on the calling thread.");
}

// serialize: a whole dict into a bytes object.
void bind_serialize(py::module_& m) {
    m.def("serialize",
          [](const py::list& tensors, const py::object& metadata) {
              auto ts = parse_tensors(tensors);
              auto md = parse_metadata(metadata);
              std::vector<tensor_entry> entries;
              std::uint64_t data = 0;
              for (const auto& t : ts) entries.push_back(t.entry), data += t.size;
              std::string header = serialize_header(entries, md ? &*md : nullptr);
              py::bytes out = py::reinterpret_steal<py::bytes>(
                  PyBytes_FromStringAndSize(nullptr, static_cast<py::ssize_t>(8 + header.size() + data)));
              if (!out) throw py::error_already_set();
              char* p = PyBytes_AS_STRING(out.ptr());
              {
                  py::gil_scoped_release nogil;
                  encode_length_prefix(header.size(), reinterpret_cast<std::byte*>(p));
                  std::memcpy(p + 8, header.data(), header.size());
                  char* d = p + 8 + header.size();
                  for (const auto& t : ts) std::memcpy(d + t.entry.begin, t.data, t.size);
              }
              return out;
          },
          py::arg("tensors"), py::arg("metadata") = py::none(),
          "The safetensors bytes of DescribedTensor records (name, dtype, shape, address, nbytes), in the "
          "reference's layout.");
}

// StreamWriter: tensors added one at a time, single pass, append.
void bind_stream_writer(py::module_& m) {
    py::class_<py_writer>(m, "StreamWriter",
                          "The single-pass streaming writer. Calls from several threads run one at a time.")
        .def(py::init([](const py::object& path, const py::kwargs& kw) {
                 const std::string spec = path_arg(path, "path");
                 auto o = make_writer_options(kw);
                 py::gil_scoped_release nogil;
                 return new py_writer(writer(spec, o));
             }),
             py::arg("path"), "A new file for `path` (a temporary until finish()). Options: reserve_bytes, "
                              "expected_tensors, direct, sync, strict_reservation.")
        .def_static("open_append", [](const py::object& path, bool repair, bool sync) {
                 const std::string spec = path_arg(path, "path");
                 append_options o;
                 o.repair = repair;
                 o.sync = sync;
                 py::gil_scoped_release nogil;
                 return new py_writer(writer::open_append(spec, o));
             },
             py::arg("path"), py::arg("repair") = false, py::arg("sync") = true,
             "Reopens an existing file to add tensors after its data.")
        .def("add", [](py_writer& self, const py::object& name_arg, const std::string& dt, const py::object& shape,
                       std::uintptr_t addr, std::uint64_t size) {
                 const std::string name = tensor_name(name_arg);
                 auto t = parse_dtype(dt, name);
                 auto s = parse_shape(shape, name);
                 auto lk = self.lock();
                 writer& w = self.get();
                 py::gil_scoped_release nogil;
                 w.add(name, t, s, {reinterpret_cast<const std::byte*>(addr), size});
             },
             "Adds a whole tensor from (address, size); the bytes are copied before it returns.")
        .def("finish", [](py_writer& self, const py::object& metadata) {
                 auto md = parse_metadata(metadata);
                 auto lk = self.lock();
                 writer& w = self.get();
                 {
                     py::gil_scoped_release nogil;
                     w.finish(md ? &*md : nullptr);
                 }
                 py::dict d = writer_stats_dict(w.stats(), "header_json");
                 self.w.reset();
                 return d;
             },
             py::arg("metadata") = py::none(),
             "Writes the header, syncs and publishes; returns the stats. In append mode None keeps the metadata.")
        .def("abandon", [](py_writer& self) {
                 auto lk = self.lock();
                 if (self.w) {
                     py::gil_scoped_release nogil;
                     self.w->abandon();
                 }
                 self.w.reset();
             },
             "Drops the file (or the appended data); never raises.")
        .def_property_readonly("closed", [](py_writer& self) {
                 auto lk = self.lock();
                 return !self.w;
             })
        .def("stats", [](py_writer& self) {
                 auto lk = self.lock();
                 return writer_stats_dict(self.get().stats(), "header_json");
             });
}

}  // namespace

void bind_writer(py::module_& m) {
    bind_save_declared(m);
    bind_serialize(m);
    bind_stream_writer(m);
}

}  // namespace ringsafe::python
