// Arena: host memory (ringsafe::host_buffer) that Python sees through the
// buffer protocol, so torch.frombuffer and numpy.frombuffer make zero-copy
// views that keep it alive. A recycled arena comes from, and goes back to,
// the process-wide buffer cache (engine/memory/buffer_cache.hpp).
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

#include "memory/buffer_cache.hpp"
#include "ringsafe/buffer.hpp"

namespace ringsafe::python {

struct arena {
    host_buffer memory;
    std::size_t size = 0;  // bytes Python sees (a recycled buffer may be larger)
    page_kind pages = page_kind::system_default;
    bool recycled = false;

    // Fresh, zeroed memory; huge pages only pay off (and only fit) from 2 MiB up.
    arena(std::size_t n, bool huge, bool prefault = true)
        : memory(n, buffer_options{kind(n, huge), prefault}), size(n), pages(kind(n, huge)) {}
    // Memory from the buffer cache (stale content), returned to it on destruction.
    static arena* from_cache(std::size_t n, bool huge);
    ~arena();
    arena(const arena&) = delete;
    arena& operator=(const arena&) = delete;

    std::byte* data() { return memory.data(); }
    static page_kind kind(std::size_t n, bool huge) {
        return huge && n >= (2u << 20) ? page_kind::huge : page_kind::small;
    }

private:
    arena() = default;
};

void bind_arena(pybind11::module_& m);

}  // namespace ringsafe::python
