// http:// and https:// objects (locate.hpp, locate_http): the URL as it is,
// or, for an Azure Blob host, the blob with its account's credentials.
#include "http/url.hpp"
#include "stores/azure_object.hpp"
#include "stores/locate.hpp"

namespace ringsafe::stores {

http::remote_object locate_http(const std::string& spec, const http_options&, const store_options& stores) {
    http::remote_object obj;
    obj.requested = obj.location = http::parse_url(spec);
    if (is_azure_blob_host(obj.requested.host)) return locate_azure_url(spec, stores.azure);
    return obj;
}

}  // namespace ringsafe::stores
