// AWS Signature Version 4 and its Google twin GOOG4-HMAC-SHA256, for any
// service: the canonical request, the string to sign, the derived key and the
// Authorization value. The S3 and GCS stores build their requests on it.
#pragma once

#include <ctime>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "stores/digest.hpp"

namespace ringsafe::stores {

// What differs between AWS's and Google's spelling of the same scheme.
struct sigv4_algorithm {
    std::string_view name;           // "AWS4-HMAC-SHA256"
    std::string_view key_prefix;     // prepended to the secret: "AWS4"
    std::string_view header_prefix;  // of the date and payload-hash headers: "x-amz-"
    std::string_view terminator;     // last element of the credential scope: "aws4_request"
};
inline constexpr sigv4_algorithm aws4{"AWS4-HMAC-SHA256", "AWS4", "x-amz-", "aws4_request"};
inline constexpr sigv4_algorithm goog4{"GOOG4-HMAC-SHA256", "GOOG4", "x-goog-", "goog4_request"};

// The signer's identity: key id and secret, region and service of the scope.
struct sigv4_key {
    std::string_view access_key_id, secret, region, service;
};

// The request time as the scope's date (YYYYMMDD) and the header's stamp (YYYYMMDDTHHMMSSZ).
struct sigv4_time {
    std::string date, stamp;
};
sigv4_time sigv4_at(std::time_t now);

// `query` (already percent-encoded, without '?') with its parameters sorted; a
// parameter without '=' gets one.
std::string sigv4_canonical_query(std::string_view query);

// Header fields to sign: lower-case names, sorted by name, values trimmed.
using signed_fields = std::vector<std::pair<std::string, std::string>>;

// "a;b;c": the names of `fields`.
std::string sigv4_signed_headers(const signed_fields& fields);

// The canonical request of `method` on `target` (origin-form "/path?query",
// percent-encoded as sent) with `fields` and the payload hash.
std::string sigv4_canonical_request(std::string_view method, std::string_view target, const signed_fields& fields,
                                    std::string_view payload_hash);

// "DATE/REGION/SERVICE/TERMINATOR".
std::string sigv4_scope(const sigv4_algorithm& alg, const sigv4_key& key, const sigv4_time& t);

// The hex signature of `canonical_request`.
std::string sigv4_signature(const sigv4_algorithm& alg, const sigv4_key& key, const sigv4_time& t,
                            std::string_view canonical_request);

// "ALG Credential=ID/SCOPE, SignedHeaders=..., Signature=...".
std::string sigv4_authorization(const sigv4_algorithm& alg, const sigv4_key& key, const sigv4_time& t,
                                const signed_fields& fields, const std::string& signature);

// The header fields that sign a GET (empty body) of `target` (origin-form, as
// sent) on `authority` (the Host) at `now`: PREFIXdate, PREFIXcontent-sha256,
// x-amz-security-token when `session_token` is not empty, and Authorization,
// the host and those fields signed.
std::vector<std::pair<std::string, std::string>> sigv4_signed_get(const sigv4_algorithm& alg, const sigv4_key& key,
                                                                  std::string_view authority, std::string_view target,
                                                                  std::string_view session_token, std::time_t now);

}  // namespace ringsafe::stores
