// The Reader class of the Python front end: ringsafe::reader's open, listing,
// planning and execution, with the GIL released around every engine call;
// Plan, Pending, the raw-address plans and the module-level calls (is_url,
// fetch_file, http_connections). Its keyword options are reader_options.cpp's,
// the device reads of its tensors device_binding.cpp's.
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "arguments.hpp"
#include "blocking_call.hpp"
#include "bindings.hpp"
#include "header_objects.hpp"
#include "read/header_match.hpp"
#include "reader_object.hpp"
#include "ringsafe/header.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/open_source.hpp"
#include "ringsafe/reader.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

// The largest file fetch_file reads whole (a config.json, a tokenizer).
constexpr std::uint64_t max_fetched_file = 64u << 20;

std::vector<dim_range> to_box(const py::handle& box) {
    std::vector<dim_range> out;
    for (auto d : box) {
        auto t = d.cast<py::tuple>();
        if (t.size() != 2) raise(errc::InvalidArgument, "a box is a list of (start, stop) pairs");
        out.push_back({non_negative(t[0], "box start"), non_negative(t[1], "box stop")});
    }
    return out;
}

// What Reader.plan_tensors refuses with a pointer to ringsafe.lowlevel: a
// raw destination (a MemorySpan, or an (address, size) tuple), not a buffer.
bool is_raw_destination(const py::handle& d) {
    return py::isinstance<py::tuple>(d) || (!PyObject_CheckBuffer(d.ptr()) && py::hasattr(d, "address"));
}

// And what Reader.plan_requests refuses so: an AddressedRequest, or a
// (name, box, address, size) tuple.
bool is_raw_request(const py::handle& q) {
    if (py::isinstance<py::tuple>(q)) return py::len(q) == 4;
    return py::hasattr(q, "address") && !py::hasattr(q, "buffer");
}

// A plan together with the Python objects owning its destinations (for
// buffer destinations, the memoryviews that hold their exports).
struct py_plan {
    std::shared_ptr<reader> r;
    read_plan plan;
    std::vector<py::object> keep;
};

py_plan plan_tensors(const py_reader& self, const std::vector<std::string>& names,
                     const std::vector<std::span<std::byte>>& spans, std::vector<py::object> keep) {
    reader& r = self.get();
    if (spans.size() != names.size()) raise(errc::InvalidArgument, "one destination per tensor is needed");
    py_plan p{self.r, {}, std::move(keep)};
    auto sel = r.select(names);
    p.plan = r.plan(sel, spans);
    return p;
}

py_plan plan_requests(const py_reader& self, std::vector<read_request> reqs, std::vector<py::object> keep) {
    reader& r = self.get();
    py_plan p{self.r, {}, std::move(keep)};
    p.plan = r.plan(reqs);
    return p;
}

std::vector<py::object> kept(const py::list& keep) {
    std::vector<py::object> out;
    for (auto k : keep) out.push_back(py::reinterpret_borrow<py::object>(k));
    return out;
}

// A small file read whole, as fetch_file hands it out: its bytes and the name
// of what was read.
struct fetched_file_record {
    py::bytes data;
    py::str name;
};

// Module-level helpers: is_url, fetch_file (FetchedFile), http_connections.
void bind_module_calls(py::module_& m) {
    py::class_<fetched_file_record>(m, "FetchedFile",
                                    "A small file fetch_file read whole (read-only): data (its bytes) and name (what "
                                    "was read: an hf:// URL pinned to its commit).")
        .def_readonly("data", &fetched_file_record::data)
        .def_readonly("name", &fetched_file_record::name)
        .def("__repr__", [](const fetched_file_record& f) {
            return "FetchedFile(name=" + std::string(py::repr(f.name)) + ", " +
                   std::to_string(py::len(f.data)) + " bytes)";
        });
    m.def("without_url_secrets", [](const std::string& text) { return without_url_secrets(text); },
          py::arg("text"),
          "`text` with the value of every URL query parameter that signs or authorizes a request "
          "(X-Amz-Signature, X-Amz-Credential, X-Amz-Security-Token, X-Goog-Signature, sig, token, ...; any "
          "case) written '...': the rule of every error message, repr and progress bar.");
    m.def("is_url", [](const py::object& spec) { return is_url(path_arg(spec, "spec")); }, py::arg("spec"),
          "Whether the engine reads `spec` over the network (a scheme it knows: http, https, s3, ...), "
          "not as a local path.");
    m.def("fetch_file",
          [](const std::string& spec, const py::kwargs& kw) {
              const reader_options o = make_options(kw);
              // On a call thread, as Reader's open: Ctrl-C ends the wait at once.
              auto got = std::make_shared<std::pair<std::string, std::string>>();
              start_call([spec, o, got](pending_call&) {
                  auto src = open_source(spec, o.source);
                  if (src->size() > max_fetched_file)
                      raise(errc::InvalidArgument, src->name() + " is " + std::to_string(src->size()) +
                                                       " bytes, more than fetch_file reads (" +
                                                       std::to_string(max_fetched_file) + ")");
                  got->first.resize(src->size());
                  // The open's first request brought the first bytes (usually the whole file).
                  const auto prefix = src->prefix();
                  const std::size_t have = std::min<std::size_t>(prefix.size(), got->first.size());
                  std::memcpy(got->first.data(), prefix.data(), have);
                  if (have < got->first.size())
                      src->read_exact(have, std::as_writable_bytes(std::span(got->first)).subspan(have));
                  got->second = src->name();
              })->wait_or_abandon();
              return fetched_file_record{py::bytes(got->first), py::str(got->second)};
          },
          py::arg("spec"),
          "A small file (a config.json) at a path or URL, with Reader's keyword options, as a FetchedFile: its "
          "data, and its name, what was read (an hf:// URL pinned to its commit). At most 64 MiB.");
    m.def("http_connections",
          [](const py::object& given) {
              http_options o;
              if (!given.is_none())
                  o.connections_per_origin = static_cast<unsigned>(
                      option_uint(given, "reader", "connections", 1, max_connections_per_origin));
              return resolved_http_options(o).connections_per_origin;
          },
          py::arg("connections") = py::none(),
          "The connections per origin a URL source uses: `connections`, else RINGSAFE_CONNECTIONS, else "
          "the engine's default.");
}

// Plan and Pending, what Reader.plan_* and Reader.start hand out.
void bind_plan_and_pending(py::module_& m) {
    py::class_<py_plan>(m, "Plan", "A validated read plan into caller memory; execute it with Reader.execute/start.")
        .def_property_readonly("total_bytes", [](const py_plan& p) { return p.plan.total_bytes(); });

    py::class_<py_pending>(m, "Pending",
                           "An engine job running on a call thread; dropping it cancels the job and waits for it.")
        .def("wait", [](py_pending& p, const py::object& progress) { p.call->wait(progress); },
             py::arg("progress") = py::none(),
             "Blocks until the job ends (Ctrl-C cancels it and raises); rethrows its error.")
        .def("cancel", [](py_pending& p) { p.call->cancel.store(true); }, "Asks the job to stop; wait() then raises.");
}

// Reader: the open (its keyword options) and what it lists (tensors, shards, metadata).
void bind_reader_open_and_listing(py::class_<py_reader>& cls) {
    cls.def(py::init([](const py::object& spec_arg, const py::kwargs& kw) {
                 const std::string spec = path_arg(spec_arg, "spec");
                 reader_options o = make_options(kw);
                 // On a call thread, so that Ctrl-C ends the wait for a slow header
                 // fetch at once (the open runs on to its own end and is dropped).
                 auto opened = std::make_shared<std::shared_ptr<reader>>();
                 start_call([spec, o, opened](pending_call&) {
                     *opened = std::make_shared<reader>(reader::open(spec, o));
                 })->wait_or_abandon();
                 py_reader out{std::move(*opened)};
                 for (const auto& sh : out.r->shards())
                     out.remote = out.remote || sh.file.empty();
                 return out;
             }),
             py::arg("spec"),
             reader_open_doc)
        .def("close", [](py_reader& self) { self.r.reset(); }, "Releases the reader (a running job keeps it until it ends).")
        .def_property_readonly("closed", [](const py_reader& self) { return !self.r; })
        .def_property_readonly("spec", [](const py_reader& self) { return path_str(shown_spec(self.get().spec())); },
                               "What it opened, as a person may see it: a URL's signing query values (a presigned "
                               "or SAS URL's) written '...', as every error message writes them.")
        .def_property_readonly("raw_spec", [](const py_reader& self) { return path_str(self.get().spec()); },
                               "What it opened, signing values included: a credential, for code that passes it "
                               "on; never log it.")
        .def_property_readonly("total_bytes", [](const py_reader& self) { return self.get().total_bytes(); })
        .def_property_readonly(
            "format",
            [](const py_reader& self) { return self.get().format() == file_format::gguf ? "gguf" : "safetensors"; },
            "The file format, told by the first bytes: \"safetensors\" or \"gguf\".")
        .def("metadata", [](const py_reader& self) { return metadata_object(self.get().metadata()); },
             "__metadata__ as a dict of str, or None.")
        .def("tensors", [](const py_reader& self) {
                 const reader& r = self.get();
                 py::list out;
                 auto ts = r.tensors();
                 for (std::uint32_t i = 0; i < ts.size(); ++i) out.append(tensor_object(ts[i], r.shard_of(i)));
                 return out;
             },
             "Every tensor in data order, as TensorInfo records.")
        .def("shards", [](const py_reader& self) {
                 py::list out;
                 for (const auto& s : self.get().shards())
                     out.append(py::cast(shard_record{path_str(s.spec), s.size, s.data_start,
                                                      file_stat_record{s.device, s.inode, s.size, s.mtime_ns}}));
                 return out;
             },
             "Every shard in index order, as ShardInfo records (spec, size, data_start, stat).")
        .def("shard_file", [](const py_reader& self, std::size_t i) -> py::object {
                 const auto shards = self.get().shards();
                 if (i >= shards.size()) throw py::index_error("shard index out of range");
                 if (shards[i].file.empty()) return py::none();
                 return path_str(shards[i].file);
             },
             "The local file shard i is read from (its path, or for an hf:// shard the Hub cache's file); "
             "None when it is read over the network.")
        .def("header_matches", [](const py_reader& self, std::size_t i, const py::object& data) {
                 const reader& r = self.get();
                 if (i >= r.shards().size()) throw py::index_error("shard index out of range");
                 py::object hold;
                 const auto bytes = readable_bytes(data, "data", hold);
                 py::gil_scoped_release nogil;
                 return read::header_matches(r, i, bytes);
             },
             py::arg("shard"), py::arg("data"),
             "Whether the header at the start of `data` (the shard's bytes as they are now, e.g. a MappedFile "
             "made resident over its header) is the one the reader parsed: its length, every tensor's name, "
             "dtype, shape and offsets, and the metadata.");
}

// Reader: selection, planning into buffers, and execution.
void bind_reader_planning(py::class_<py_reader>& cls) {
    cls.def("select_glob", [](const py_reader& self, const py::object& patterns) {
                 const reader& r = self.get();
                 std::vector<std::string> names;
                 selection sel = r.select_glob(tensor_names(patterns));  // indices() views it: keep it alive
                 for (auto i : sel.indices()) names.push_back(r.tensors()[i].name);
                 return names;
             },
             "Names of the tensors matching any glob, in data order.")
        .def("select", [](const py_reader& self, const py::object& names) {
                 self.get().select(tensor_names(names));  // TensorNotFound / a name given twice
                 return names;
             },
             "Checks that every name exists (TensorNotFound naming the first that does not).")
        .def("box_bytes", [](const py_reader& self, const py::object& name, const py::list& box) {
                 auto b = to_box(box);
                 return self.get().box_bytes(tensor_name(name), b);
             },
             "Bytes a box [(start, stop), ...] of the tensor occupies packed.")
        .def("plan_tensors", [](const py_reader& self, const py::object& names, const py::list& dsts) {
                 auto ns = tensor_names(names);
                 std::vector<py::object> keep;
                 std::vector<std::span<std::byte>> spans;
                 for (std::size_t i = 0; i < dsts.size(); ++i) {
                     if (is_raw_destination(dsts[i]))
                         throw py::type_error("Reader.plan_tensors takes writable buffers (bytearray, numpy arrays, "
                                              "memoryviews); raw MemorySpan / (address, size) destinations are "
                                              "ringsafe.lowlevel.plan_tensors_at");
                     spans.push_back(writable_bytes(dsts[i], "destination " + std::to_string(i) +
                                                                 (i < ns.size() ? " ('" + ns[i] + "')" : std::string()),
                                                    keep));
                 }
                 return plan_tensors(self, ns, spans, std::move(keep));
             },
             py::arg("names"), py::arg("dsts"),
             "Plans whole tensors into writable C-contiguous buffers, one per name (each at least the "
             "tensor's size: BufferTooSmall names it); the plan holds the buffers until it is gone.")
        .def("plan_requests", [](const py_reader& self, const py::sequence& requests) {
                 std::vector<read_request> reqs;
                 std::vector<py::object> keep;
                 for (auto q : requests) {
                     if (is_raw_request(q))
                         throw py::type_error("Reader.plan_requests takes TensorRequest records or (name, box, "
                                              "buffer) tuples; raw AddressedRequest / (name, box, address, size) "
                                              "requests are ringsafe.lowlevel.plan_requests_at");
                     auto [name, box, buffer] = tensor_request(q);
                     read_request rq;
                     rq.tensor = std::move(name);
                     rq.box = to_box(box);
                     rq.dst = writable_bytes(buffer, "the destination of '" + rq.tensor + "'", keep);
                     reqs.push_back(std::move(rq));
                 }
                 return plan_requests(self, std::move(reqs), std::move(keep));
             },
             py::arg("requests"),
             "Plans boxes: a list of TensorRequest records (name, [(start, stop), ...], buffer), or (name, box, "
             "buffer) tuples (also accepted), each buffer writable, C-contiguous and at least the box's packed "
             "size.")
        .def("execute", [](const py_reader& self, const py_plan& p, const py::object& progress) {
                 auto r = p.r;
                 if (r != self.r) self.get();  // a closed reader is refused
                 read_plan plan = p.plan;
                 run_blocking([r, plan](pending_call& pc) { r->execute(plan, pc.control()); }, progress,
                              !self.remote && plan.total_bytes() < inline_job_bytes);
             },
             py::arg("plan"), py::arg("progress") = py::none(),
             "Runs a plan, GIL released; Ctrl-C cancels it. progress(done, total) runs on this thread.")
        .def("start", [](const py_reader& self, const py_plan& p) {
                 self.get();
                 auto r = p.r;
                 read_plan plan = p.plan;
                 return new py_pending(start_call([r, plan](pending_call& pc) { r->execute(plan, pc.control()); }), p.keep);
             },
             "Starts a plan on a call thread; returns a Pending to wait() on.");
}

// The low-level calls: raw addresses, which the engine writes to unchecked
// (ringsafe.lowlevel; the package's own loaders use them for tensor memory).
void bind_raw_address_calls(py::module_& m) {
    m.def("plan_tensors_at",
          [](const py_reader& self, const py::object& names, const py::sequence& dsts, const py::list& keep) {
              std::vector<std::span<std::byte>> spans;
              for (auto d : dsts) spans.push_back(memory_span(d, "plan_tensors_at"));
              return plan_tensors(self, tensor_names(names), spans, kept(keep));
          },
          py::arg("reader"), py::arg("names"), py::arg("dsts"), py::arg("keep") = py::list(),
          "Plans whole tensors into destinations, MemorySpan records (address, size) or (address, size) tuples "
          "(also accepted); `keep` owns that memory. Unchecked: the caller guarantees the memory.");
    m.def("plan_requests_at",
          [](const py_reader& self, const py::sequence& requests, const py::list& keep) {
              std::vector<read_request> reqs;
              for (auto q : requests) {
                  auto [name, box, dst] = addressed_request(q);
                  read_request rq;
                  rq.tensor = std::move(name);
                  rq.box = to_box(box);
                  rq.dst = dst;
                  reqs.push_back(std::move(rq));
              }
              return plan_requests(self, std::move(reqs), kept(keep));
          },
          py::arg("reader"), py::arg("requests"), py::arg("keep") = py::list(),
          "Plans boxes: a list of AddressedRequest records (name, [(start, stop), ...], address, size), or "
          "(name, box, address, size) tuples (also accepted). Unchecked: the caller guarantees the memory.");
}

}  // namespace

void bind_reader(py::module_& m) {
    bind_module_calls(m);
    bind_plan_and_pending(m);
    py::class_<py_reader> cls(m, "Reader", "An open checkpoint: a file, an http(s)/s3/gs/az URL or a sharded index.");
    bind_reader_open_and_listing(cls);
    bind_reader_planning(cls);
    bind_raw_address_calls(m);
}

}  // namespace ringsafe::python
