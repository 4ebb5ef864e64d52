#include "stores/object_path.hpp"

#include <cctype>

#include "http/ascii_case.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::stores {

object_path split_object_url(std::string_view spec, std::string_view scheme) {
    const std::string prefix = std::string(scheme) + "://";
    auto bad = [&](const std::string& why) -> object_path { http::invalid_url(spec, why); };
    if (!http::starts_with_icase(spec, prefix)) return bad("expected " + prefix + "BUCKET/OBJECT");
    std::string_view rest = spec.substr(prefix.size());
    const auto slash = rest.find('/');
    object_path p;
    p.bucket = std::string(rest.substr(0, slash));
    if (p.bucket.empty()) return bad("missing the bucket: " + prefix + "BUCKET/OBJECT");
    for (char c : p.bucket)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
            return bad("invalid character in the bucket name '" + p.bucket + "'");
    if (slash == std::string_view::npos || slash + 1 == rest.size())
        return bad("missing the object: " + prefix + p.bucket + "/OBJECT");
    p.object = std::string(rest.substr(slash + 1));
    for (char c : p.object)
        if (c == '\0' || c == '\r' || c == '\n') return bad("control character in the object name");
    return p;
}

object_path split_s3_url(std::string_view spec) {
    const http::url_parts parts = http::split_url(spec);
    if (http::lower(parts.scheme) != "s3") http::invalid_url(spec, "expected s3://BUCKET/KEY");
    object_path p;
    p.bucket = http::parse_authority(parts.authority, spec).host;
    // The key: what follows the first '/' (or '?') after the bucket, as it is; the S3 layer encodes it.
    const std::string_view key = parts.target.empty() ? parts.target : parts.target.substr(1);
    if (key.empty()) http::invalid_url(spec, "s3 URLs need a key: s3://bucket/key");
    p.object = std::string(key);
    return p;
}

http::url store_endpoint(const std::string& text, std::string_view named, const std::string& spec) {
    auto refuse = [&]() -> http::url {
        raise(errc::InvalidArgument,
              std::string(named) + " '" + text + "' is not an http(s) URL (opening " + spec + ")");
    };
    http::url u;
    try {
        u = http::parse_url(text);
    } catch (const error&) {
        return refuse();
    }
    if (u.target.find('?') != std::string::npos) return refuse();
    return u;
}

http::url object_url(const http::url& endpoint, const object_path& p) {
    return http::below(endpoint, p.bucket + "/" + http::uri_encode(p.object, true));
}

}  // namespace ringsafe::stores
