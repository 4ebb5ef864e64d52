// gs://BUCKET/OBJECT objects: the XML API endpoint and URL, generation
// pinning, and the signing that each kind of credential needs.
#pragma once

#include <ctime>
#include <string>

#include "http/range_fetch.hpp"
#include "http/url.hpp"
#include "ringsafe/stores.hpp"

namespace ringsafe::stores {

// The XML API endpoint for `o`: its endpoint, else the emulator variables
// (`from_env` set), else https://storage.googleapis.com. Throws InvalidArgument
// naming `spec` when it is not an http(s) URL or host:port.
http::url gcs_endpoint(const gcs_options& o, bool& from_env, const std::string& spec);

// GOOG4-HMAC-SHA256 header fields (x-goog-date, x-goog-content-sha256,
// Authorization) for a GET of `target` at `now`; region "auto", service "storage".
http::header_fields goog4_get_fields(const http::url& target, const std::string& access_id,
                                            const std::string& secret, std::time_t now);

}  // namespace ringsafe::stores
