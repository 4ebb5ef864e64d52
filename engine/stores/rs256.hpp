// JSON Web Signatures with RS256 (RFC 7515, RSASSA-PKCS1-v1_5 with SHA-256,
// RFC 7518 section 3.3), signed with OpenSSL: the assertion a Google service
// account exchanges for an access token.
#pragma once

#include <string>
#include <string_view>

#include "stores/digest.hpp"

namespace ringsafe::stores {

// "HEADER.PAYLOAD.SIGNATURE": the compact JWS of the JSON texts `header` and
// `payload` (encoded as given, byte for byte), signed with `private_key_pem`
// (PKCS#8 or PKCS#1 PEM, RSA). Throws InvalidArgument naming `key_name`
// (never the key) when the key cannot be read or is not RSA.
std::string rs256_jws(std::string_view header, std::string_view payload, std::string_view private_key_pem,
                      const std::string& key_name);

}  // namespace ringsafe::stores
