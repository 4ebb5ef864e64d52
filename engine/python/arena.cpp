#include "arena.hpp"
#include "arguments.hpp"

#include <utility>

namespace py = pybind11;

namespace ringsafe::python {

arena* arena::from_cache(std::size_t n, bool huge) {
    auto* a = new arena;
    a->pages = kind(n, huge);
    a->size = n;
    a->recycled = true;
    try {
        a->memory = memory::take_buffer(n, a->pages);
    } catch (...) {
        delete a;
        throw;
    }
    return a;
}

arena::~arena() {
    if (recycled) memory::give_buffer(std::move(memory), pages);
}

void bind_arena(py::module_& m) {
    py::class_<arena>(m, "Arena", py::buffer_protocol(),
                      "Owned host memory exposed through the buffer protocol; freed (or, recycled, returned "
                      "to the process-wide arena cache) when the last view of it is gone.")
        .def(py::init([](std::size_t size, bool huge, bool prefault, bool recycle) {
                 py::gil_scoped_release nogil;  // prefaulting a large arena takes a while
                 return recycle ? arena::from_cache(size, huge) : new arena(size, huge, prefault);
             }),
             py::arg("size"), py::arg("huge") = true, py::arg("prefault") = false, py::arg("recycle") = false,
             "Allocates `size` bytes: on transparent huge pages from 2 MiB up unless huge=False, else 4 KiB "
             "pages; prefault=True touches every page now. recycle=True takes memory from the arena cache "
             "(contents stale, not zeroed; faulted in when it was used before) and gives it back when freed; "
             "otherwise the memory is fresh and zeroed.")
        .def_property_readonly("address", [](arena& a) { return reinterpret_cast<std::uintptr_t>(a.data()); },
                               "Address of the first byte.")
        .def("__len__", [](const arena& a) { return a.size; })
        .def_buffer([](arena& a) {
            return py::buffer_info(a.data(), 1, py::format_descriptor<std::uint8_t>::format(), 1,
                                   {static_cast<py::ssize_t>(a.size)}, {1}, false);
        });
    m.def("arena_cache_stats", [] {
             auto s = memory::buffer_cache_statistics();
             py::dict d;
             d["cached_bytes"] = s.cached_bytes;
             d["buffers"] = s.buffers;
             d["hits"] = s.hits;
             d["misses"] = s.misses;
             d["released"] = s.released;
             d["limit"] = memory::buffer_cache_limit();
             d["idle_seconds"] = memory::buffer_cache_idle_seconds();
             return d;
         },
         "The arena cache: cached_bytes, buffers, hits, misses, released (bytes), limit, idle_seconds.");
    m.def("set_arena_cache",
          [](const py::object& limit, const py::object& idle_seconds) {
              if (!idle_seconds.is_none()) {
                  const double s = idle_seconds.cast<double>();
                  if (!(s >= 0)) throw py::value_error("idle_seconds must be >= 0");
                  memory::set_buffer_cache_idle_seconds(s);
              }
              if (!limit.is_none()) {
                  memory::set_buffer_cache_limit(option_uint(limit, "arena cache", "limit", 0, UINT64_MAX >> 1));
              }
          },
          py::arg("limit") = py::none(), py::arg("idle_seconds") = py::none(),
          "Sets the arena cache's limit in bytes (0 disables it and frees what it holds) and/or its idle "
          "time before everything is returned to the kernel.");
    m.def("trim_arena_cache", [] { memory::trim_buffer_cache(); }, "Returns every cached arena to the kernel now.");
}

}  // namespace ringsafe::python
