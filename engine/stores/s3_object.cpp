#include "stores/s3_object.hpp"

#include "http/ascii_case.hpp"
#include "http/environment.hpp"
#include "http/http_settings.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/stores.hpp"
#include "stores/locate.hpp"
#include "stores/sigv4.hpp"

namespace ringsafe::stores {
using http::header_fields, http::remote_object, http::url;
using http::below, http::check_field_value, http::fill_from_env, http::parse_url, http::uri_encode;
namespace {

sigv4_key key_of(const s3_options& s) { return {s.access_key_id, s.secret_access_key, s.region, "s3"}; }

bool dns_compatible(const std::string& bucket) {
    return bucket.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
}

}  // namespace

s3_options resolve_s3_options(const s3_options& opts) {
    s3_options s = opts;
    fill_from_env(s.access_key_id, {"AWS_ACCESS_KEY_ID"});
    fill_from_env(s.secret_access_key, {"AWS_SECRET_ACCESS_KEY"});
    fill_from_env(s.session_token, {"AWS_SESSION_TOKEN"});
    fill_from_env(s.region, {"AWS_REGION", "AWS_DEFAULT_REGION"});
    if (s.region.empty()) s.region = "us-east-1";
    fill_from_env(s.endpoint, {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"});
    return s;
}

url s3_http_url(const object_path& s3url, const s3_options& s) {
    const bool custom = !s.endpoint.empty();
    const std::string ep_text = custom ? s.endpoint : "https://s3." + s.region + ".amazonaws.com";
    if (http::starts_with_icase(ep_text, "s3://")) {
        (void)split_s3_url(ep_text);  // a malformed one named as such
        raise(errc::InvalidArgument, "S3 endpoint must be http(s): " + s.endpoint);
    }
    url ep = parse_url(ep_text);
    const std::string& bucket = s3url.bucket;
    bool virtual_host = s.style == s3_options::addressing::virtual_host ||
                        (s.style == s3_options::addressing::automatic && !custom && dns_compatible(bucket));
    if (!virtual_host) return below(ep, bucket + "/" + uri_encode(s3url.object, true));
    if (ep.ipv6) raise(errc::InvalidArgument, "virtual-host style S3 needs a host name endpoint, not " + s.endpoint);
    ep.host = bucket + "." + ep.host;
    return below(ep, uri_encode(s3url.object, true));
}

header_fields sigv4_get_fields(const url& target, const s3_options& s, std::time_t now) {
    return sigv4_signed_get(aws4, key_of(s), target.authority(), target.target, s.session_token, now);
}

std::string sigv4_presign(const url& target, const s3_options& s, std::chrono::seconds expires, std::time_t now) {
    const sigv4_time t = sigv4_at(now);
    const http::target_parts parts = http::split_target(target.target);
    const std::string path(parts.path);
    std::string query(parts.query);
    query += (query.empty() ? "" : "&") + std::string("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=") +
             uri_encode(s.access_key_id + "/" + sigv4_scope(aws4, key_of(s), t), false) + "&X-Amz-Date=" + t.stamp +
             "&X-Amz-Expires=" + std::to_string(expires.count()) + "&X-Amz-SignedHeaders=host";
    if (!s.session_token.empty()) query += "&X-Amz-Security-Token=" + uri_encode(s.session_token, false);
    const std::string cq = sigv4_canonical_query(query);
    const std::string creq =
        sigv4_canonical_request("GET", path + "?" + cq, {{"host", target.authority()}}, "UNSIGNED-PAYLOAD");
    return target.origin() + path + "?" + cq + "&X-Amz-Signature=" + sigv4_signature(aws4, key_of(s), t, creq);
}

remote_object make_s3_object(const object_path& s3url, const s3_options& opts) {
    const s3_options s = resolve_s3_options(opts);
    remote_object obj;
    obj.requested = obj.location = s3_http_url(s3url, s);
    if (!s.access_key_id.empty()) {
        if (s.secret_access_key.empty())
            raise(errc::InvalidArgument, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not, for s3://" + s3url.bucket + "/" + s3url.object);
        obj.sign = [s](const url& target, std::string_view, const header_fields&) {
            return sigv4_get_fields(target, s, std::time(nullptr));
        };
    }
    return obj;
}

http::remote_object locate_s3(const std::string& spec, const http_options&, const store_options& stores) {
    const object_path p = split_s3_url(spec);
    const s3_options s3 = resolve_s3_options(stores.s3);
    check_field_value(s3.access_key_id, "the S3 access key id", spec);
    check_field_value(s3.secret_access_key, "the S3 secret access key", spec);
    check_field_value(s3.session_token, "the S3 session token", spec);
    check_field_value(s3.region, "the S3 region", spec);
    return make_s3_object(p, stores.s3);
}

}  // namespace ringsafe::stores

namespace ringsafe {

std::string presign_s3_url(const std::string& s3_url, const s3_options& opts, std::chrono::seconds expires) {
    using namespace stores;
    if (!http::starts_with_icase(s3_url, "s3://")) raise(errc::InvalidArgument, "presign_s3_url: not an s3:// URL: " + s3_url);
    const object_path u = split_s3_url(s3_url);
    if (expires.count() < 1 || expires.count() > 7 * 24 * 3600)
        raise(errc::InvalidArgument, "presign_s3_url: expiry of " + std::to_string(expires.count()) +
                                         " s is out of range 1..604800 for " + s3_url);
    const s3_options resolved = resolve_s3_options(opts);
    if (resolved.access_key_id.empty())
        raise(errc::InvalidArgument, "presign_s3_url: no access key to sign " + s3_url + " with");
    return sigv4_presign(s3_http_url(u, resolved), resolved, expires, std::time(nullptr));
}

}  // namespace ringsafe
