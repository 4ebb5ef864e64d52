// ringsafe::apply_environment_credentials: the Hub's token for https:// URLs
// of the Hub (hf:// URLs find it themselves: hub_settings.cpp).
#include "http/url.hpp"
#include "ringsafe/http.hpp"
#include "stores/hub_settings.hpp"

namespace ringsafe {

void apply_environment_credentials(const std::string& url, http_options& opts) {
    if (!opts.bearer_token.empty()) return;
    http_engine::url u;
    try {
        u = http_engine::parse_url(url);
    } catch (const error&) {
        return;  // open_url reports bad URLs; hf:// is not an http URL
    }
    if (u.scheme == "s3" || !stores::is_hub_host(u.host)) return;
    opts.bearer_token = stores::environment_hub_token();
}

}  // namespace ringsafe
