// SCHEME://BUCKET/OBJECT URLs of the object stores that name a bucket (or
// container) and an object in it (s3://, gs://, az://), and where such an
// object lies on its store's endpoint.
#pragma once

#include <string>
#include <string_view>

#include "http/url.hpp"

namespace ringsafe::stores {

struct object_path {
    std::string bucket;  // S3 or GCS bucket, Azure container
    std::string object;  // raw (not percent-encoded), may hold '/'
};

// Splits `spec` (scheme matched in any case, e.g. "gs://"). Throws
// InvalidArgument naming the URL when the bucket is empty or not made of
// letters, digits, '-', '_' and '.', or the object is empty.
object_path split_object_url(std::string_view spec, std::string_view scheme);

// Splits an s3://BUCKET/KEY URL (scheme in any case), the bucket read as an
// http URL's host is (lower-cased; a port, an [IPv6] literal and a '?' before
// the key's '/' accepted; the fragment dropped), the key raw. Throws
// InvalidArgument naming the URL as parse_url does for a bad bucket, and
// "s3 URLs need a key: s3://bucket/key" for none.
object_path split_s3_url(std::string_view spec);

// The endpoint `text` of a store (`named`: "the GCS endpoint", a variable's
// name) as a URL. Throws InvalidArgument naming `named`, `text` and `spec`
// when it is not an http(s) URL without a query.
http::url store_endpoint(const std::string& text, std::string_view named, const std::string& spec);

// The URL of `p` on `endpoint`: ENDPOINT/BUCKET/OBJECT (the object percent-encoded but for '/').
http::url object_url(const http::url& endpoint, const object_path& p);

}  // namespace ringsafe::stores
