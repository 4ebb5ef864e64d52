#include "stores/gcs_object.hpp"

#include <cstdlib>

#include "ringsafe/error.hpp"
#include "stores/gcs_credentials.hpp"
#include "stores/locate.hpp"
#include "stores/object_path.hpp"
#include "stores/sigv4.hpp"

namespace ringsafe::stores {
namespace {

std::string gcs_env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

}  // namespace

http_engine::url gcs_endpoint(const gcs_options& o, bool& from_env, const std::string& spec) {
    std::string text = o.endpoint;
    const char* named = "the GCS endpoint";
    from_env = false;
    for (const char* var : {"STORAGE_EMULATOR_HOST", "CLOUD_STORAGE_EMULATOR_ENDPOINT"}) {
        if (!text.empty()) break;
        text = gcs_env(var);
        named = var;
        from_env = !text.empty();
    }
    if (text.empty()) text = "https://storage.googleapis.com";
    if (text.find("://") == std::string::npos) text = "http://" + text;  // the Python client's reading of host:port
    http_engine::url u;
    try {
        u = http_engine::parse_url(text);
    } catch (const error&) {
        raise(errc::InvalidArgument, std::string(named) + " '" + text + "' is not an http(s) URL (opening " + spec + ")");
    }
    if ((u.scheme != "http" && u.scheme != "https") || u.target.find('?') != std::string::npos)
        raise(errc::InvalidArgument, std::string(named) + " '" + text + "' is not an http(s) URL (opening " + spec + ")");
    return u;
}

http_engine::header_fields goog4_get_fields(const http_engine::url& target, const std::string& access_id,
                                            const std::string& secret, std::time_t now) {
    static const std::string empty_hash = sha256_hex("");
    const sigv4_key key{access_id, secret, "auto", "storage"};
    const sigv4_time t = sigv4_at(now);
    const signed_fields fields{{"host", target.authority()}, {"x-goog-content-sha256", empty_hash}, {"x-goog-date", t.stamp}};
    const std::string sig = sigv4_signature(goog4, key, t, sigv4_canonical_request("GET", target.target, fields, empty_hash));
    return {{"x-goog-date", t.stamp},
            {"x-goog-content-sha256", empty_hash},
            {"Authorization", sigv4_authorization(goog4, key, t, fields, sig)}};
}

http_engine::remote_object locate_gcs(const std::string& spec, const http_options& opts) {
    const object_path p = split_object_url(spec, "gs");
    bool from_env = false;
    http_engine::url u = gcs_endpoint(opts.gcs, from_env, spec);
    std::string base = u.target == "/" ? "" : u.target;
    if (!base.empty() && base.back() == '/') base.pop_back();
    u.target = base + "/" + p.bucket + "/" + http_engine::uri_encode(p.object, true);
    http_engine::remote_object obj;
    obj.requested = obj.location = u;
    obj.pin_field = "x-goog-generation";  // later requests read the generation the first one saw
    obj.pin_query = "generation";
    gcs_auth auth = resolve_gcs_auth(opts.gcs, opts, from_env, spec);
    obj.credentials = std::move(auth.token);
    if (!auth.hmac_access_id.empty())
        obj.sign = [id = auth.hmac_access_id, secret = auth.hmac_secret](const http_engine::url& target, std::string_view,
                                                                         const http_engine::header_fields&) {
            return goog4_get_fields(target, id, secret, std::time(nullptr));
        };
    return obj;
}

}  // namespace ringsafe::stores
