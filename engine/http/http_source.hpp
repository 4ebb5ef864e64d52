// The openers of the HTTP source (http_source.cpp): a remote object, whichever
// store (engine/stores) located it, as a ringsafe::source. The dispatcher
// (engine/dispatch) and the Hub's cache decorator call them.
#pragma once

#include <memory>
#include <string>

#include "http/remote_object.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/source.hpp"
#include "source/async_source.hpp"
#include "source/deferred_open.hpp"

namespace ringsafe::http {

// The HTTP source as its openers give it: a source that also runs on an Asio
// executor and opens in two steps, so that a decorator (the Hub's cache)
// reaches all three sides of the source it wraps without a cast.
class remote_source : public source, public detail::async_source, public detail::deferred_open {};

// A remote object as a source, named `name` in messages (the URL as given),
// with its first request made (size, validators, prefix()). Requests go to
// object.requested, signed by object.sign.
std::unique_ptr<remote_source> open_remote(const std::string& name, remote_object object, const http_options& opts);

// The same source before its first request (a deferred_open).
std::unique_ptr<remote_source> prepare_remote(const std::string& name, remote_object object, const http_options& opts);

}  // namespace ringsafe::http
