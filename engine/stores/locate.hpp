// The object stores a URL can name, each turned into the remote object that
// engine/http fetches: the endpoint URL, credentials (from the options, else
// the store's own environment variables) and the signing of each request.
// One locator per scheme; the dispatcher (source/open_source.cpp) picks it.
#pragma once

#include <string>

#include "http/range_fetch.hpp"
#include "ringsafe/http.hpp"

namespace ringsafe::stores {

// http:// and https:// URLs: the object at that URL (the caller's headers and
// bearer token go to its origin only).
http_engine::remote_object locate_http(const std::string& url, const http_options& opts);

// s3://bucket/key: the endpoint and addressing of opts.s3 (empty fields from
// the AWS_* environment), requests signed with SigV4 (unsigned without an
// access key: public buckets). Throws InvalidArgument naming the URL for a
// credential that would split a request or a key id without its secret.
http_engine::remote_object locate_s3(const std::string& url, const http_options& opts);

}  // namespace ringsafe::stores
