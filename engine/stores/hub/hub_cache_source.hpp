// The Hub's cache as a source decorator, which the dispatcher
// (engine/dispatch/open_source.cpp) applies around hf:// URLs: a file in the
// cache opens as that local file (no request); any other opens as the remote
// object the Hub's locator made (stores/hub/hub_locator.hpp), wrapped so that
// the source is named by the commit it pinned, the bytes that land are
// checked against the blob the Hub names and, when asked, written into the
// cache and published (stores/hub/hub_tee.hpp, hub_cache.hpp).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "http/remote_object.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/stores.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe::stores {

// A file the Hub cache holds, to open as a local file (io_uring) named `name`.
struct hub_cache_hit {
    std::string local_file;  // CACHE/.../snapshots/COMMIT/PATH
    std::string name;        // the URL pinned (hf://ORG/NAME@COMMIT/PATH): messages, and an index's shards resolve against it
};

// The file hf:// `url` names in the Hub cache (stores.hub, else the HF_*
// environment), hashed first when stores.hub.verify is always; nullopt when it
// is not there. Throws InvalidArgument naming the URL for a malformed one,
// ENOENT (system category) for a file not in the cache when offline,
// ObjectChanged for a cached file whose bytes are not its blob's.
std::optional<hub_cache_hit> find_hub_cached(const std::string& url, const http_options& opts,
                                            const store_options& stores);

// The file hf:// `url` names, not in the cache: `located` (locate_hub(url,
// opts, stores)) as a source named hf://ORG/NAME@COMMIT/PATH after its first request
// (a repo named without a path whose index is not there: its single file),
// its bytes hashed and, with hub_options::cache, written into the cache as
// they land. `deferred`: before its first request (a deferred_open). Throws
// as open_url does.
std::unique_ptr<source> open_hub_cached(const std::string& url, http::remote_object located, const http_options& opts,
                                        const store_options& stores,
                                        bool deferred);

}  // namespace ringsafe::stores
