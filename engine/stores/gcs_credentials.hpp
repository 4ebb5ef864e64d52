// Where requests to a gs:// object get their credentials, in the order
// Google's tools look for them (gcs_options in include/ringsafe/stores.hpp):
// service-account and authorized-user files (an OAuth token from their
// token_uri), the metadata server, HMAC keys, else none. Resolving reads the
// environment and the credentials file, never the network: the token itself
// is fetched in the first request's event loop (oauth_token.hpp).
#pragma once

#include <memory>
#include <string>

#include "http/range_fetch.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/stores.hpp"

namespace ringsafe::stores {

struct gcs_auth {
    std::shared_ptr<http::credential_source> token;  // an OAuth token source, or null
    std::string hmac_access_id, hmac_secret;                 // set: sign with GOOG4-HMAC-SHA256
    std::string description;                                 // for messages: where the credentials come from
};

// The credentials for `spec` (a gs:// URL, for messages). `emulator_from_env`:
// the endpoint came from STORAGE_EMULATOR_HOST / CLOUD_STORAGE_EMULATOR_ENDPOINT,
// whose requests are anonymous unless `o` names credentials. Throws
// InvalidArgument naming the file (never its secrets) for a credentials file
// that cannot be read, is not JSON, lacks a field, or has a type other than
// service_account / authorized_user; and for an HMAC id without its secret.
gcs_auth resolve_gcs_auth(const gcs_options& o, const http_options& h, bool emulator_from_env, const std::string& spec);

// The JSON claims of a service account's JWT grant (RFC 7523): iss, scope
// (devstorage.read_only), aud (the token endpoint), iat = now, exp = now + 3600.
std::string gcs_jwt_claims(const std::string& client_email, const std::string& token_uri, std::int64_t now);

}  // namespace ringsafe::stores
