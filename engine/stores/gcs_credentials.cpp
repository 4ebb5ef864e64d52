#include "stores/gcs_credentials.hpp"

#include <ctime>
#include <fstream>
#include <sstream>

#include <boost/json.hpp>

#include "http/environment.hpp"
#include "http/http_settings.hpp"
#include "http/small_exchange.hpp"
#include "ringsafe/error.hpp"
#include "stores/oauth_token.hpp"
#include "stores/rs256.hpp"

namespace ringsafe::stores {
namespace {

namespace json = boost::json;
using http::small_request;
using http::url;

constexpr std::string_view read_only_scope = "https://www.googleapis.com/auth/devstorage.read_only";
constexpr std::string_view default_token_uri = "https://oauth2.googleapis.com/token";

std::string form_encode(std::string_view v) { return http::uri_encode(v, false); }

// A field of the credentials file: InvalidArgument naming the file and the field when missing.
std::string field(const json::object& o, std::string_view name, const std::string& file) {
    auto it = o.find(name);
    if (it == o.end() || !it->value().is_string() || it->value().get_string().empty())
        raise(errc::InvalidArgument, "the Google credentials file " + file + " has no '" + std::string(name) + "'");
    return std::string(it->value().get_string());
}

std::string optional_field(const json::object& o, std::string_view name) {
    auto it = o.find(name);
    return it != o.end() && it->value().is_string() ? std::string(it->value().get_string()) : std::string();
}

url token_url(const std::string& text, const std::string& file) {
    try {
        return http::parse_url(text);
    } catch (const error&) {
        raise(errc::InvalidArgument, "the Google credentials file " + file + " has a token_uri that is not an http(s) URL");
    }
}

small_request form_post(const url& to, std::string body) {
    small_request rq;
    rq.method = "POST";
    rq.target = to;
    rq.fields = {{"Content-Type", "application/x-www-form-urlencoded"}, {"Accept", "application/json"}};
    rq.body = std::move(body);
    return rq;
}

// A service-account key: a fresh RS256 JWT per request, exchanged at token_uri.
gcs_auth service_account(const json::object& o, const std::string& file) {
    const std::string email = field(o, "client_email", file);
    const std::string key = field(o, "private_key", file);
    const std::string key_id = optional_field(o, "private_key_id");
    std::string uri = optional_field(o, "token_uri");
    const url to = token_url(uri.empty() ? std::string(default_token_uri) : uri, file);
    const std::string key_name = "the private_key of " + file;
    // Sign once now: a key that cannot sign is reported at open, not mid-read.
    json::object header{{"alg", "RS256"}, {"typ", "JWT"}};
    if (!key_id.empty()) header["kid"] = key_id;
    const std::string header_json = json::serialize(header);
    (void)rs256_jws(header_json, "{}", key, key_name);
    auto make = [=] {
        const std::string claims = gcs_jwt_claims(email, to.str(), static_cast<std::int64_t>(std::time(nullptr)));
        return form_post(to, "grant_type=" + form_encode("urn:ietf:params:oauth:grant-type:jwt-bearer") +
                                 "&assertion=" + rs256_jws(header_json, claims, key, key_name));
    };
    gcs_auth a;
    a.description = "the token endpoint " + to.str() + " of the service account in " + file;
    a.token = oauth_token_source(make, a.description);
    return a;
}

// An authorized-user file (gcloud auth application-default login): a refresh-token grant.
gcs_auth authorized_user(const json::object& o, const std::string& file) {
    const std::string id = field(o, "client_id", file), secret = field(o, "client_secret", file);
    const std::string refresh = field(o, "refresh_token", file);
    std::string uri = optional_field(o, "token_uri");
    const url to = token_url(uri.empty() ? std::string(default_token_uri) : uri, file);
    const std::string body = "grant_type=refresh_token&client_id=" + form_encode(id) + "&client_secret=" +
                             form_encode(secret) + "&refresh_token=" + form_encode(refresh);
    gcs_auth a;
    a.description = "the token endpoint " + to.str() + " of the authorized user in " + file;
    a.token = oauth_token_source([to, body] { return form_post(to, body); }, a.description);
    return a;
}

gcs_auth from_file(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) raise(errc::InvalidArgument, "cannot read the Google credentials file " + file);
    std::stringstream text;
    text << in.rdbuf();
    boost::system::error_code ec;
    json::value v = json::parse(text.str(), ec);
    if (ec || !v.is_object()) raise(errc::InvalidArgument, "the Google credentials file " + file + " is not a JSON object");
    const json::object& o = v.get_object();
    const std::string type = optional_field(o, "type");
    if (type == "service_account") return service_account(o, file);
    if (type == "authorized_user") return authorized_user(o, file);
    raise(errc::InvalidArgument, "the Google credentials file " + file + " is of type '" + type +
                                     "'; ringsafe reads service_account and authorized_user files");
}

// gcloud's application-default credentials, when the file exists.
std::string gcloud_adc_file() {
    std::string dir = http::env_text("CLOUDSDK_CONFIG");
    if (dir.empty()) dir = http::expand_home("~/.config/gcloud");
    if (dir.starts_with("~")) return "";  // no $HOME
    const std::string f = dir + "/application_default_credentials.json";
    return std::ifstream(f).good() ? f : "";
}

// The metadata server's host: $GCE_METADATA_HOST, else metadata.google.internal on a
// Compute Engine VM (its DMI product name says so, as google-auth checks), else none.
std::string metadata_host() {
    if (std::string h = http::env_text("GCE_METADATA_HOST"); !h.empty()) return h;
    std::ifstream dmi("/sys/class/dmi/id/product_name");
    std::string product;
    std::getline(dmi, product);
    return product.starts_with("Google") ? "metadata.google.internal" : "";
}

gcs_auth metadata_server(const std::string& host, const std::string& spec) {
    url to;
    try {
        to = http::parse_url("http://" + host + "/computeMetadata/v1/instance/service-accounts/default/token");
    } catch (const error&) {
        raise(errc::InvalidArgument, "GCE_METADATA_HOST '" + host + "' is not a host[:port] (opening " + spec + ")");
    }
    gcs_auth a;
    a.description = "the metadata server " + to.origin();
    a.token = oauth_token_source(
        [to] {
            small_request rq;
            rq.target = to;
            rq.fields = {{"Metadata-Flavor", "Google"}};
            return rq;
        },
        a.description);
    return a;
}

}  // namespace

std::string gcs_jwt_claims(const std::string& client_email, const std::string& token_uri, std::int64_t now) {
    return json::serialize(json::object{{"iss", client_email},
                                        {"scope", read_only_scope},
                                        {"aud", token_uri},
                                        {"iat", now},
                                        {"exp", now + 3600}});
}

gcs_auth resolve_gcs_auth(const gcs_options& o, const http_options& h, bool emulator_from_env, const std::string& spec) {
    if (o.anonymous || http::env_true("RUNAI_STREAMER_GCS_USE_ANONYMOUS_CREDENTIALS")) return {};
    if (!h.bearer_token.empty()) return {};  // engine/http sends it to the endpoint's origin
    if (!o.credentials_file.empty()) return from_file(o.credentials_file);
    auto hmac = [&](std::string id, std::string secret) {
        if (secret.empty())
            raise(errc::InvalidArgument, "a GCS HMAC access id is set but not its secret (GS_SECRET_ACCESS_KEY), for " + spec);
        http::check_field_value(id, "the GCS HMAC access id", spec);
        gcs_auth a;
        a.hmac_access_id = std::move(id);
        a.hmac_secret = std::move(secret);
        a.description = "the HMAC key " + a.hmac_access_id;
        return a;
    };
    if (!o.hmac_access_id.empty()) return hmac(o.hmac_access_id, o.hmac_secret);
    if (emulator_from_env) return {};  // as Google's clients treat an emulator
    if (std::string f; http::fill_from_env(f, {"RUNAI_STREAMER_GCS_CREDENTIAL_FILE", "GOOGLE_APPLICATION_CREDENTIALS"}))
        return from_file(f);
    if (std::string f = gcloud_adc_file(); !f.empty()) return from_file(f);
    if (std::string host = metadata_host(); !host.empty()) return metadata_server(host, spec);
    if (std::string id = http::env_text("GS_ACCESS_KEY_ID"); !id.empty()) return hmac(id, http::env_text("GS_SECRET_ACCESS_KEY"));
    return {};
}

}  // namespace ringsafe::stores
