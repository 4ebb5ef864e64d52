// MappedFile: ringsafe::mapped_file for Python, seen through the buffer
// protocol (writable: copy-on-write pages private to the process), so
// torch.frombuffer and numpy.frombuffer make zero-copy views that keep the
// mapping alive. populate() runs with the GIL released; Ctrl-C cancels it.
// PopulateStats, what populate() and copy_to() return.
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "arguments.hpp"
#include "bindings.hpp"
#include "blocking_call.hpp"
#include "header_objects.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/mapped_file.hpp"

namespace py = pybind11;

namespace ringsafe::python {

namespace {

struct py_mapping {
    std::shared_ptr<const mapped_file> file;
};

// populate() of fewer bytes runs on the calling thread (no hand-off to a call
// thread: a get_tensor loop pays it per tensor); even cold, such a call ends
// within a few tenths of a second, when Ctrl-C is seen.
constexpr std::uint64_t inline_populate_bytes = 64u << 20;

// MappedFile: the open, what the mapping is (size, stat, address).
void bind_mapping_open(py::class_<py_mapping>& cls) {
    cls.def(py::init([](const py::object& path_arg_) {
                 const std::string path = path_arg(path_arg_, "path");
                 py::gil_scoped_release nogil;
                 return py_mapping{std::make_shared<const mapped_file>(mapped_file::open(path))};
             }),
             py::arg("path"), "Maps the whole file at `path` (str, bytes or os.PathLike; OSError naming it when it cannot).")
        .def_property_readonly("size", [](const py_mapping& self) { return self.file->size(); }, "The file's size.")
        .def_property_readonly("path", [](const py_mapping& self) { return path_str(self.file->path()); })
        .def_property_readonly("stat",
                               [](const py_mapping& self) {
                                   return file_stat_record{self.file->device(), self.file->inode(),
                                                           self.file->size(), self.file->mtime_ns()};
                               },
                               "The file when it was mapped, a FileStat (which file, its size and modification "
                               "time): compare it with ShardInfo.stat.")
        .def_property_readonly("address",
                               [](const py_mapping& self) { return reinterpret_cast<std::uintptr_t>(self.file->data()); },
                               "Address of the first byte (0 for an empty file).");
}

// MappedFile: making ranges resident, copying out of it, asking the page cache.
void bind_mapping_io(py::class_<py_mapping>& cls) {
    cls.def("populate",
             [](const py_mapping& self, const py::sequence& ranges, unsigned threads, const py::object& progress) {
                 std::vector<mapped_range> rs;
                 std::uint64_t total = 0;
                 rs.reserve(ranges.size());
                 for (const auto item : ranges) {
                     const auto [off, len] = file_range(item);
                     rs.push_back({off, len});
                     total += len;
                 }
                 auto file = self.file;
                 populate_stats stats;
                 run_blocking([file, rs = std::move(rs), threads, &stats](pending_call& pc) {
                     stats = file->populate(rs, threads, pc.control());
                 }, progress, total < inline_populate_bytes);
                 return stats;
             },
             py::arg("ranges"), py::arg("threads") = 0, py::arg("progress") = py::none(),
             "Makes the ranges resident and mapped, in parallel: FileRange records (offset, length), or "
             "(offset, length) tuples (also accepted); returns a PopulateStats (bytes, cold_bytes, threads). "
             "Ctrl-C cancels it (large ranges); progress(done, total) runs on this thread.")
        .def("copy_to",
             [](const py_mapping& self, const py::sequence& copies, unsigned threads, const py::object& progress) {
                 // Every buffer is checked, and its export held, before any byte moves.
                 std::vector<py::object> keep;
                 std::vector<mapped_copy> cs;
                 std::uint64_t total = 0;
                 const auto* lo = self.file->data();
                 const auto* hi = lo + self.file->size();
                 for (const auto item : copies) {
                     const auto [offset, length, buffer] = range_copy(item);
                     const std::span<std::byte> b =
                         writable_bytes(buffer, "the destination of bytes " + std::to_string(offset) + "+" +
                                                  std::to_string(length), keep);
                     if (length > b.size())
                         raise(errc::BufferTooSmall, "copying " + std::to_string(length) + " bytes of " +
                                                         self.file->path() + " at offset " + std::to_string(offset) +
                                                         " into a buffer of " + std::to_string(b.size()));
                     if (length != 0 && b.data() < hi && lo < b.data() + length)
                         raise(errc::InvalidArgument, "copy_to: a destination overlaps the mapping of " +
                                                          self.file->path());
                     cs.push_back({offset, length, b.data()});
                     total += length;
                 }
                 auto file = self.file;
                 populate_stats stats;
                 run_blocking([file, &cs, threads, &stats](pending_call& pc) {
                     stats = file->copy_to(cs, threads, pc.control());
                 }, progress, total < inline_job_bytes);
                 return stats;
             },
             py::arg("copies"), py::arg("threads") = 0, py::arg("progress") = py::none(),
             "Copies ranges of the file into the start of each writable, C-contiguous buffer, in parallel, the "
             "GIL released: RangeCopy records (offset, length, buffer), or (offset, length, buffer) tuples (also "
             "accepted); returns a PopulateStats (bytes, cold_bytes, threads). Ctrl-C "
             "cancels it (what was copied stays); progress(done, total) runs on this thread.")
        .def("resident",
             [](const py_mapping& self, std::uint64_t offset, std::uint64_t length) {
                 py::gil_scoped_release nogil;  // mincore of a large range takes a while
                 return self.file->resident_bytes({offset, length});
             },
             py::arg("offset"), py::arg("length"), "Bytes of the range the page cache holds now.")
        .def("will_need",
             [](const py_mapping& self, std::uint64_t offset, std::uint64_t length) {
                 py::gil_scoped_release nogil;
                 self.file->will_need({offset, length});
             },
             py::arg("offset"), py::arg("length"), "Starts the kernel's readahead of the range; returns at once.")
        .def("__len__", [](const py_mapping& self) { return self.file->size(); })
        .def_buffer([](py_mapping& self) {
            return py::buffer_info(self.file->data(), 1, py::format_descriptor<std::uint8_t>::format(), 1,
                                   {static_cast<py::ssize_t>(self.file->size())}, {1}, false);
        });
}

}  // namespace

void bind_mapping(py::module_& m) {
    py::class_<populate_stats>(m, "PopulateStats",
                               "What MappedFile.populate() and copy_to() did (read-only): bytes (of the ranges), "
                               "cold_bytes (of those, the bytes the page cache did not hold before) and threads "
                               "(that worked on it).")
        .def_readonly("bytes", &populate_stats::bytes)
        .def_readonly("cold_bytes", &populate_stats::cold_bytes)
        .def_readonly("threads", &populate_stats::threads)
        .def("__repr__", [](const populate_stats& s) {
            return "PopulateStats(bytes=" + std::to_string(s.bytes) + ", cold_bytes=" + std::to_string(s.cold_bytes) +
                   ", threads=" + std::to_string(s.threads) + ")";
        });
    py::class_<py_mapping> cls(m, "MappedFile", py::buffer_protocol(),
                           "A local file mapped private (copy-on-write) into memory; unmapped when the last "
                           "view of it is gone. The mapping keeps the file's pages if the path is replaced.");
    bind_mapping_open(cls);
    bind_mapping_io(cls);
}

}  // namespace ringsafe::python
