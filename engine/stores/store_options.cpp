// Options that name every store at once (include/ringsafe/stores.hpp):
// set_store_endpoint and set_anonymous, for the CLI's flags and Python's keywords.
#include "ringsafe/stores.hpp"

namespace ringsafe {

void set_store_endpoint(store_options& opts, const std::string& endpoint) {
    opts.s3.endpoint = opts.gcs.endpoint = opts.azure.endpoint = opts.hub.endpoint = endpoint;
}

void set_anonymous(store_options& opts) { opts.gcs.anonymous = opts.azure.anonymous = true; }

}  // namespace ringsafe
