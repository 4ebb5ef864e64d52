#include "http/environment.hpp"
#include "ringsafe/error.hpp"
#include "stores/gcs_credentials.hpp"
#include "stores/locate.hpp"
#include "stores/object_path.hpp"
#include "stores/sigv4.hpp"

// gs:// objects (gcs_object.hpp, locate_gcs).
#include "stores/gcs_object.hpp"

namespace ringsafe::stores {

http::url gcs_endpoint(const gcs_options& o, bool& from_env, const std::string& spec) {
    std::string text = o.endpoint;
    const char* named = "the GCS endpoint";
    const char* var = http::fill_from_env(text, {"STORAGE_EMULATOR_HOST", "CLOUD_STORAGE_EMULATOR_ENDPOINT"});
    from_env = var != nullptr;
    if (var) named = var;
    if (text.empty()) text = "https://storage.googleapis.com";
    if (text.find("://") == std::string::npos) text = "http://" + text;  // the Python client's reading of host:port
    return store_endpoint(text, named, spec);
}

http::header_fields goog4_get_fields(const http::url& target, const std::string& access_id,
                                            const std::string& secret, std::time_t now) {
    return sigv4_signed_get(goog4, {access_id, secret, "auto", "storage"}, target.authority(), target.target, "", now);
}

http::remote_object locate_gcs(const std::string& spec, const http_options& opts, const store_options& stores) {
    const object_path p = split_object_url(spec, "gs");
    bool from_env = false;
    http::remote_object obj;
    obj.requested = obj.location = object_url(gcs_endpoint(stores.gcs, from_env, spec), p);
    obj.pin = http::version_pin{"x-goog-generation", "generation"};  // later requests read the generation the first one saw
    gcs_auth auth = resolve_gcs_auth(stores.gcs, opts, from_env, spec);
    obj.credentials = std::move(auth.token);
    if (!auth.hmac_access_id.empty())
        obj.sign = [id = auth.hmac_access_id, secret = auth.hmac_secret](const http::url& target, std::string_view,
                                                                         const http::header_fields&) {
            return goog4_get_fields(target, id, secret, std::time(nullptr));
        };
    return obj;
}

}  // namespace ringsafe::stores
