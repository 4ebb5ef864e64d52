// SCHEME://BUCKET/OBJECT URLs of the object stores that name a bucket (or
// container) and an object in it: gs://, az://.
#pragma once

#include <string>
#include <string_view>

namespace ringsafe::stores {

struct object_path {
    std::string bucket;  // GCS bucket, Azure container
    std::string object;  // raw (not percent-encoded), may hold '/'
};

// Splits `spec` (scheme matched in any case, e.g. "gs://"). Throws
// InvalidArgument naming the URL when the bucket is empty or not made of
// letters, digits, '-', '_' and '.', or the object is empty.
object_path split_object_url(std::string_view spec, std::string_view scheme);

}  // namespace ringsafe::stores
