// Engine-internal: the async engine's view of a reader's shards (their
// sources) without widening the public API.
#pragma once

#include "read/reader_impl.hpp"

namespace ringsafe::detail {

struct reader_access {
    static reader::impl& of(reader& r) noexcept { return *r.p_; }
    // A reader over a state filled by the shared opening steps (async_open).
    static reader make(std::unique_ptr<reader::impl> p) { return reader(std::move(p)); }
};

}  // namespace ringsafe::detail
