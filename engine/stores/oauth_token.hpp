// An OAuth 2.0 access token (RFC 6749 section 5.1) fetched with one small
// request and cached until shortly before it expires: the credentials of
// gs:// objects (a service account's JWT grant, a refresh-token grant, the
// metadata server's token). Fetched inside the event loop of the read that
// needs it (engine/http), so no thread blocks on it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "http/range_fetch.hpp"
#include "http/small_exchange.hpp"

namespace ringsafe::stores {

// A credential_source whose fields are "Authorization: Bearer <token>".
// `make` builds the request that fetches a new token (called again for each
// refresh: a fresh JWT each time); `what` names that request in messages
// ("the token endpoint of the service account in /path/key.json"). A token is
// used until min(225 s, half its lifetime) before it expires, then fetched
// again. Errors are HttpError naming `what`, the status and the OAuth error
// code the answer gives, never a token.
std::shared_ptr<http::credential_source> oauth_token_source(std::function<http::small_request()> make,
                                                                  std::string what);

}  // namespace ringsafe::stores
