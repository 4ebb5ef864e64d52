// Engine-internal: the async writer's view of a writer's engine (its data
// stream, temporary and finish steps) without widening the public API.
#pragma once

#include "write/stream_writer.hpp"

namespace ringsafe::detail {

struct writer_access {
    // Null for a moved-from writer.
    static writer::impl* of(writer& w) noexcept { return w.impl_.get(); }
};

}  // namespace ringsafe::detail
