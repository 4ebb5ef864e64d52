// Checks on http_options before anything is sent (engine-internal): header
// fields and credentials that would split a request.
#pragma once

#include <string>
#include <string_view>

#include "ringsafe/http.hpp"

namespace ringsafe::http {

// Throws InvalidArgument naming the header (or option) and `url`, never the
// value, when a caller-supplied header name or value or the bearer token
// holds CR, LF or NUL, or a header name is empty or not an RFC 9110 token.
void check_request_fields(const http_options& o, const std::string& url);

// Throws InvalidArgument naming `what` and `url`, never the value, when a
// credential or other value a store puts into a request holds CR, LF or NUL.
void check_field_value(std::string_view value, const char* what, const std::string& url);

}  // namespace ringsafe::http
