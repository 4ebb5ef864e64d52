// ringsafe::apply_environment_credentials: HF_TOKEN for the Hugging Face Hub.
#include <cstdlib>

#include "http/url.hpp"
#include "ringsafe/http.hpp"

namespace ringsafe {
namespace {

bool host_is_or_under(const std::string& host, const std::string& domain) {
    return host == domain || (host.size() > domain.size() && host.ends_with("." + domain));
}

bool is_hub_host(const std::string& host) {
    if (host_is_or_under(host, "huggingface.co") || host_is_or_under(host, "hf.co")) return true;
    if (const char* ep = std::getenv("HF_ENDPOINT"); ep && *ep) {  // a mirror or private Hub
        try {
            return host == http_engine::parse_url(ep).host;
        } catch (const error&) {
        }
    }
    return false;
}

}  // namespace

void apply_environment_credentials(const std::string& url, http_options& opts) {
    if (!opts.bearer_token.empty()) return;
    const char* token = std::getenv("HF_TOKEN");
    if (!token || !*token) return;
    http_engine::url u;
    try {
        u = http_engine::parse_url(url);
    } catch (const error&) {
        return;  // open_url reports bad URLs
    }
    if (u.scheme != "s3" && is_hub_host(u.host)) opts.bearer_token = token;
}

}  // namespace ringsafe
