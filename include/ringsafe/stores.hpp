// What each object store adds to the HTTP options (http.hpp): credentials
// and endpoints from a store's environment, and S3 URLs presigned for any
// HTTP client. Defined in engine/stores.
#pragma once

#include <chrono>
#include <string>

#include "ringsafe/http.hpp"

namespace ringsafe {

// Fills credentials the environment provides for an http(s) `url` into `opts`
// when the caller gave none: the Hub's token (HF_TOKEN, HUGGING_FACE_HUB_TOKEN,
// the token file, unless HF_HUB_DISABLE_IMPLICIT_TOKEN; see hub_options::token)
// as the bearer token when the URL is at the Hub's origin (https://huggingface.co,
// hf.co and their subdomains on port 443, or HF_ENDPOINT's origin). The CLI
// calls it. hf:// URLs find their token themselves.
void apply_environment_credentials(const std::string& url, http_options& opts);

// Sets `endpoint` as the endpoint of every store that takes one (s3, gcs,
// azure, hub), so that it serves whichever the URL's scheme picks (the CLI's
// --endpoint-url, Python's endpoint_url=).
void set_store_endpoint(http_options& opts, const std::string& endpoint);

// Sends no credentials to gs:// and az:// objects (public buckets; the CLI's
// --anonymous, Python's anonymous=True).
void set_anonymous(http_options& opts);

// A presigned GET URL (SigV4 query signing) for `s3_url` (s3://bucket/key) that any
// HTTP client can fetch without credentials for `expires` (1 s to 7 days); `opts`
// is resolved as open_url resolves it (the AWS_* environment fills what is empty).
// Throws InvalidArgument naming the URL: not s3://, no access key, expiry out of range.
std::string presign_s3_url(const std::string& s3_url, const s3_options& opts, std::chrono::seconds expires);

}  // namespace ringsafe
