// The digests and text encodings that request signers use (OpenSSL): SHA-256,
// HMAC-SHA256, lower-case hex, base64 and base64url. SigV4/GOOG4, Azure
// Shared Key and RS256 JWTs build on these alone.
#pragma once

#include <string>
#include <string_view>

namespace ringsafe::stores {

// The raw SHA-256 digest of `data` (32 bytes).
std::string sha256(std::string_view data);

// The raw HMAC-SHA256 of `message` under `key` (32 bytes).
std::string hmac_sha256(std::string_view key, std::string_view message);

// Lower-case hex of `bytes`.
std::string hex(std::string_view bytes);

// Lower-case hex of the SHA-256 of `data` (a payload hash; "" hashes the empty body).
std::string sha256_hex(std::string_view data);

// Standard base64 with padding (RFC 4648 section 4).
std::string base64(std::string_view bytes);

// Decodes standard base64 with padding into `out`; false (out unspecified)
// when `text` is not that.
bool from_base64(std::string_view text, std::string& out);

// Base64url without padding (RFC 7515 section 2).
std::string base64url(std::string_view bytes);

}  // namespace ringsafe::stores
