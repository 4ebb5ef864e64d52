// Arena: host memory (ringsafe::host_buffer: huge pages, prefaulted) that
// Python sees through the buffer protocol, so torch.frombuffer and
// numpy.frombuffer make zero-copy views that keep it alive.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

#include "ringsafe/buffer.hpp"

namespace ringsafe::python {

struct arena {
    host_buffer memory;
    // Huge pages only pay off (and only fit) from 2 MiB up.
    arena(std::size_t size, bool huge, bool prefault = true)
        : memory(size, buffer_options{huge && size >= (2u << 20) ? page_kind::huge : page_kind::system_default, prefault}) {}
};

void bind_arena(pybind11::module_& m);

}  // namespace ringsafe::python
