// hub_options and the HF_* environment (hub_settings.hpp).
#include "stores/hub_settings.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "http/url.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::stores {
namespace {

std::string hub_env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

// constants._is_true
bool hub_env_true(const char* name) {
    std::string v = hub_env(name);
    std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

// os.path.expanduser for a leading "~" or "~/".
std::string hub_expand_user(std::string p) {
    if (p == "~" || p.starts_with("~/")) {
        const std::string home = hub_env("HOME");
        if (!home.empty()) p = home + p.substr(1);
    }
    return p;
}

// utils/_auth._clean_token: CR and LF removed, then surrounding spaces.
std::string clean_hub_token(std::string t) {
    std::erase_if(t, [](char c) { return c == '\r' || c == '\n'; });
    const auto first = t.find_first_not_of(" \t\f\v");
    if (first == std::string::npos) return {};
    const auto last = t.find_last_not_of(" \t\f\v");
    return t.substr(first, last - first + 1);
}

std::string hf_home_dir() {
    std::string h = hub_env("HF_HOME");
    if (h.empty()) {
        std::string xdg = hub_env("XDG_CACHE_HOME");
        if (xdg.empty()) xdg = hub_expand_user("~/.cache");
        h = xdg + "/huggingface";
    }
    return hub_expand_user(h);
}

bool hub_host_is_or_under(const std::string& host, const std::string& domain) {
    return host == domain || (host.size() > domain.size() && host.ends_with("." + domain));
}

}  // namespace

std::string implicit_hub_token(std::string* origin) {
    if (hub_env_true("HF_HUB_DISABLE_IMPLICIT_TOKEN")) return {};
    std::string from;
    std::string token;
    // `HF_TOKEN or HUGGING_FACE_HUB_TOKEN`: the first that is set and not empty, then cleaned.
    for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
        const std::string raw = hub_env(name);
        if (raw.empty()) continue;
        from = name;
        token = clean_hub_token(raw);
        break;
    }
    if (from.empty()) {
        std::string path = hub_env("HF_TOKEN_PATH");
        path = path.empty() ? hf_home_dir() + "/token" : hub_expand_user(path);
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

bool is_hub_origin(const http_engine::url& u) {
    if (u.scheme == "https" && u.port == http_engine::default_port(u.scheme) &&
        (hub_host_is_or_under(u.host, "huggingface.co") || hub_host_is_or_under(u.host, "hf.co")))
        return true;
    if (const std::string ep = hub_env("HF_ENDPOINT"); !ep.empty()) {  // a mirror or private Hub
        try {
            return u.origin() == http_engine::parse_url(ep).origin();
        } catch (const error&) {
        }
    }
    return false;
}

hub_settings hub_settings_of(const http_options& o) {
    hub_settings s;
    s.endpoint = o.hub.endpoint.empty() ? hub_env("HF_ENDPOINT") : o.hub.endpoint;
    if (s.endpoint.empty()) s.endpoint = "https://huggingface.co";
    while (s.endpoint.size() > 1 && s.endpoint.back() == '/') s.endpoint.pop_back();

    if (!o.hub.token.empty()) {
        s.token = o.hub.token;
        s.token_origin = "hub_options::token";
    } else if (!o.bearer_token.empty()) {
        s.token = o.bearer_token;
        s.token_origin = "the bearer token option";
    } else {
        s.token = implicit_hub_token(&s.token_origin);
    }
    check_hub_token(s.token, s.token_origin);

    s.cache_dir = o.hub.cache_dir;
    if (s.cache_dir.empty()) s.cache_dir = hub_env("HF_HUB_CACHE");
    if (s.cache_dir.empty()) s.cache_dir = hub_env("HUGGINGFACE_HUB_CACHE");
    if (s.cache_dir.empty()) s.cache_dir = hf_home_dir() + "/hub";
    s.cache_dir = hub_expand_user(s.cache_dir);
    s.offline = o.hub.offline || hub_env_true("HF_HUB_OFFLINE") || hub_env_true("TRANSFORMERS_OFFLINE");
    s.write_cache = o.hub.cache;
    return s;
}

}  // namespace ringsafe::stores
