// s3://bucket/key objects: endpoint and addressing style, and AWS Signature
// Version 4 (header auth for requests, query auth for presigned URLs).
#pragma once

#include <chrono>
#include <ctime>
#include <string>

#include "http/range_fetch.hpp"
#include "http/url.hpp"
#include "ringsafe/stores.hpp"
#include "stores/object_path.hpp"

namespace ringsafe::stores {

// Resolved S3 settings: `opts` with empty fields filled from the environment.
s3_options resolve_s3_options(const s3_options& opts);

// The http(s) URL of s3://bucket/key (split_s3_url) on the endpoint of
// `resolved` (path- or virtual-host style). Throws InvalidArgument naming the
// endpoint when it is an s3:// URL, or a virtual-host one on an IPv6 literal.
http::url s3_http_url(const object_path& s3url, const s3_options& resolved);

// A remote_object for an s3:// URL whose requests are signed with SigV4
// (unsigned when no access key is configured: public buckets).
http::remote_object make_s3_object(const object_path& s3url, const s3_options& opts);

// SigV4 header fields (Authorization, x-amz-date, x-amz-content-sha256,
// x-amz-security-token) for a GET of `target` at time `now`.
http::header_fields sigv4_get_fields(const http::url& target, const s3_options& resolved, std::time_t now);

// A presigned GET URL for `target` (an http(s) URL of an S3 object) valid for `expires`.
std::string sigv4_presign(const http::url& target, const s3_options& resolved, std::chrono::seconds expires, std::time_t now);

}  // namespace ringsafe::stores
