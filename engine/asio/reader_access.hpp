// Engine-internal: the async engine's view of a reader's shards (their
// sources) without widening the public API.
#pragma once

#include "read/reader_impl.hpp"

namespace ringsafe::detail {

struct reader_access {
    static reader::impl& of(reader& r) noexcept { return *r.p_; }
};

}  // namespace ringsafe::detail
