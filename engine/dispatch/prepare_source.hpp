// The dispatcher's first step without I/O (engine-internal): what
// open_source() would open for a spec, for async_open to open on its executor.
#pragma once

#include <memory>
#include <string>

#include "ringsafe/open_source.hpp"

namespace ringsafe::dispatch {

// What open_source() would open for a spec, before any request: a source
// that opens in two steps (remote objects: `deferred`, a deferred_open not
// usable as a source until its first_request() has completed), or else a
// local file to open (`local_file`, named `name` in messages: the spec itself
// for a path, the cache's file of an hf:// URL named by its pinned URL).
struct prepared_source {
    std::unique_ptr<source> deferred;
    std::string local_file;
    std::string name;
};
// Only the checks of the spec and options (InvalidArgument), a cache lookup
// (an hf:// file missing offline: ENOENT) and the TLS setup can fail here.
prepared_source prepare_source(const std::string& spec, const source_options& opts);

}  // namespace ringsafe::dispatch
