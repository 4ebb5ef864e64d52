// The entry points of each source kind that the dispatcher
// (source/open_source.cpp) picks from; each kind defines its own in its
// folder (engine/uring: files; engine/http: remote objects, whichever store
// (engine/stores) named them). The blocking ones for files are public
// (open_file); open_file_named gives a store's cache file the URL's name.
#pragma once

#include <memory>
#include <string>

#include "http/range_fetch.hpp"
#include "ringsafe/file_source.hpp"
#include "ringsafe/http.hpp"

namespace ringsafe::http {

// A remote object as a source, named `name` in messages (the URL as given),
// with its first request made (size, validators, prefix()). Requests go to
// object.requested, signed by object.sign.
std::unique_ptr<source> open_remote(const std::string& name, remote_object object, const http_options& opts);

// The same source before its first request (a deferred_open).
std::unique_ptr<source> prepare_remote(const std::string& name, remote_object object, const http_options& opts);

}  // namespace ringsafe::http

namespace ringsafe::uring {

// open_file(path, opts), the source named `name` (its messages about the file
// itself still name `path`): a store's cache file named by the URL it holds.
std::unique_ptr<source> open_file_named(const std::string& path, const std::string& name, const file_options& opts);

}  // namespace ringsafe::uring
