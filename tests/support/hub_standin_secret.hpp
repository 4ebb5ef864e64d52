// The Hub stand-in's CDN (tests/support/hub_standin.cpp): the secret its
// presigned Locations are signed with, and the nginx location that checks
// them (secure_link: a bad signature is 403, an expired one 403, or 410 with
// gone=1) and refuses any request that carries Authorization (400): no
// credential may reach the CDN. tests/python/servers.py writes the same block.
#pragma once

#include <string>

namespace ringsafe::test {

inline constexpr const char* hub_cdn_secret = "ringsafe-hub-standin-cdn";

// The nginx `location / { ... }` of the CDN (for nginx_config::server_body).
inline std::string hub_cdn_location() {
    return std::string("    location / {\n"
                       "      if ($http_authorization) { return 400; }\n"
                       "      secure_link $arg_Signature,$arg_Expires;\n"
                       "      secure_link_md5 \"$secure_link_expires$uri$arg_cred ") +
           hub_cdn_secret +
           "\";\n"
           "      if ($secure_link = \"\") { return 403; }\n"
           "      set $expiry \"$secure_link:$arg_gone\";\n"
           "      if ($expiry = \"0:1\") { return 410; }\n"
           "      if ($secure_link = \"0\") { return 403; }\n"
           "    }\n";
}

}  // namespace ringsafe::test
