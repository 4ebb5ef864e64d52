// Azure Storage Shared Key: the string to sign of a blob GET, the
// Authorization value made from it, and the x-ms-date it carries.
#pragma once

#include <ctime>
#include <string>
#include <string_view>

#include "http/header_fields.hpp"
#include "http/url.hpp"

namespace ringsafe::stores {

// The Shared Key string to sign of a GET of `target` carrying `fields` (the
// standard fields If-Match, ... and x-ms-* ones, names in any case) and Range
// `range` ("" for none), for `account` (the canonicalized resource is
// "/ACCOUNT" + the path as sent, so a path-style emulator URL names the
// account twice; then the query parameters, sorted, decoded).
std::string azure_string_to_sign(const http::url& target, std::string_view account, std::string_view range,
                                 const http::header_fields& fields);

// "SharedKey ACCOUNT:base64(HMAC-SHA256(base64decode(key), string_to_sign))",
// `key_base64` as the portal shows it. Throws InvalidArgument (never naming
// the key) when it is not base64.
std::string azure_shared_key_authorization(std::string_view account, std::string_view key_base64,
                                           std::string_view string_to_sign);

// The x-ms-date value of `now` (RFC 1123: "Sun, 06 Nov 1994 08:49:37 GMT").
std::string azure_date(std::time_t now);

}  // namespace ringsafe::stores
