// Checks on http_options before anything is sent (engine-internal): header
// fields and credentials that would split a request.
#pragma once

#include <string>

#include "ringsafe/http.hpp"

namespace ringsafe::http_engine {

// Throws InvalidArgument naming the header (or option) and `url`, never the
// value, when a caller-supplied header name or value, the bearer token or an
// S3 credential field (`s3` already filled from the environment) holds CR,
// LF or NUL, or a header name is empty or not an RFC 9110 token.
void check_request_fields(const http_options& o, const s3_options* s3, const std::string& url);

}  // namespace ringsafe::http_engine
