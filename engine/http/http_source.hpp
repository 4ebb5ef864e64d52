// The openers of the HTTP source (http_source.cpp): a remote object, whichever
// store (engine/stores) located it, as a ringsafe::source. The dispatcher
// (engine/dispatch) and the Hub's source call them.
#pragma once

#include <memory>
#include <string>

#include "http/range_fetch.hpp"
#include "ringsafe/http.hpp"

namespace ringsafe::http {

// A remote object as a source, named `name` in messages (the URL as given),
// with its first request made (size, validators, prefix()). Requests go to
// object.requested, signed by object.sign.
std::unique_ptr<source> open_remote(const std::string& name, remote_object object, const http_options& opts);

// The same source before its first request (a deferred_open).
std::unique_ptr<source> prepare_remote(const std::string& name, remote_object object, const http_options& opts);

}  // namespace ringsafe::http
