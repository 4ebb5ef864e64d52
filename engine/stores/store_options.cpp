// Options that name every store at once (include/ringsafe/http.hpp):
// set_store_endpoint and set_anonymous, for the CLI's flags and Python's keywords.
#include "ringsafe/stores.hpp"

namespace ringsafe {

void set_store_endpoint(http_options& opts, const std::string& endpoint) {
    opts.s3.endpoint = opts.gcs.endpoint = opts.azure.endpoint = opts.hub.endpoint = endpoint;
}

void set_anonymous(http_options& opts) { opts.gcs.anonymous = opts.azure.anonymous = true; }

}  // namespace ringsafe
