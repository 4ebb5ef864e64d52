// The entry points of each source kind that the dispatcher
// (source/open_source.cpp) picks from; each kind defines its own in its
// folder (engine/uring: files, engine/http: URLs). The blocking ones are
// public (open_file, open_url).
#pragma once

#include <memory>
#include <string>

#include "ringsafe/http.hpp"

namespace ringsafe::http_engine {

// The source open_url() makes, before its first request (a deferred_open).
std::unique_ptr<source> prepare_url(const std::string& url, const http_options& opts);

}  // namespace ringsafe::http_engine
