// hub_options and the HF_* environment (hub_settings.hpp).
#include "stores/hub/hub_settings.hpp"

#include <fstream>
#include <sstream>
#include <utility>

#include "http/environment.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::stores {
namespace {

// utils/_auth._clean_token: CR and LF removed, then surrounding spaces.
std::string clean_hub_token(std::string t) {
    std::erase_if(t, [](char c) { return c == '\r' || c == '\n'; });
    const auto first = t.find_first_not_of(" \t\f\v");
    if (first == std::string::npos) return {};
    const auto last = t.find_last_not_of(" \t\f\v");
    return t.substr(first, last - first + 1);
}

std::string hf_home_dir() {
    std::string h;
    if (!http::fill_from_env(h, {"HF_HOME"})) {
        std::string xdg;
        if (!http::fill_from_env(xdg, {"XDG_CACHE_HOME"})) xdg = http::expand_home("~/.cache");
        h = xdg + "/huggingface";
    }
    return http::expand_home(h);
}

bool hub_host_is_or_under(const std::string& host, const std::string& domain) {
    return host == domain || (host.size() > domain.size() && host.ends_with("." + domain));
}

}  // namespace

std::string implicit_hub_token(std::string* origin) {
    if (http::env_true("HF_HUB_DISABLE_IMPLICIT_TOKEN")) return {};
    std::string from;
    std::string token;
    // `HF_TOKEN or HUGGING_FACE_HUB_TOKEN`: the first that is set and not empty, then cleaned.
    if (const char* name = http::fill_from_env(token, {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"})) {
        from = name;
        token = clean_hub_token(std::move(token));
    }
    if (from.empty()) {
        std::string path = http::env_text("HF_TOKEN_PATH");
        path = path.empty() ? hf_home_dir() + "/token" : http::expand_home(path);
        std::ifstream in(path, std::ios::binary);
        if (!in) return {};
        std::ostringstream text;
        text << in.rdbuf();
        from = "the token file " + path;
        token = clean_hub_token(text.str());
    }
    check_hub_token(token, from);
    if (origin) *origin = from;
    return token;
}

void check_hub_token(const std::string& token, const std::string& origin) {
    for (char c : token)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
            raise(errc::InvalidArgument, "the Hub token (from " + origin + ") holds a control character; it is not sent");
}

bool is_hub_origin(const http::url& u) {
    if (u.scheme == "https" && u.port == http::default_port(u.scheme) &&
        (hub_host_is_or_under(u.host, "huggingface.co") || hub_host_is_or_under(u.host, "hf.co")))
        return true;
    if (const std::string ep = http::env_text("HF_ENDPOINT"); !ep.empty()) {  // a mirror or private Hub
        try {
            return u.origin() == http::parse_url(ep).origin();
        } catch (const error&) {
        }
    }
    return false;
}

hub_settings hub_settings_of(const hub_options& hub, const http_options& o) {
    hub_settings s;
    s.endpoint = hub.endpoint;
    http::fill_from_env(s.endpoint, {"HF_ENDPOINT"});
    if (s.endpoint.empty()) s.endpoint = "https://huggingface.co";
    while (s.endpoint.size() > 1 && s.endpoint.back() == '/') s.endpoint.pop_back();

    if (!hub.token.empty()) {
        s.token = hub.token;
        s.token_origin = "hub_options::token";
    } else if (!o.bearer_token.empty()) {
        s.token = o.bearer_token;
        s.token_origin = "the bearer token option";
    } else {
        s.token = implicit_hub_token(&s.token_origin);
    }
    check_hub_token(s.token, s.token_origin);

    s.cache_dir = hub.cache_dir;
    http::fill_from_env(s.cache_dir, {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"});
    if (s.cache_dir.empty()) s.cache_dir = hf_home_dir() + "/hub";
    s.cache_dir = http::expand_home(s.cache_dir);
    s.offline = hub.offline || http::env_true("HF_HUB_OFFLINE") || http::env_true("TRANSFORMERS_OFFLINE");
    s.write_cache = hub.cache;
    s.verify = hub.verify;
    return s;
}

}  // namespace ringsafe::stores
