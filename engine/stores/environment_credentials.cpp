// ringsafe::apply_environment_credentials: the Hub's token for https:// URLs
// at the Hub's origins (hf:// URLs find it themselves: hub_settings.cpp).
#include "http/url.hpp"
#include "ringsafe/stores.hpp"
#include "stores/hub/hub_settings.hpp"

namespace ringsafe {

void apply_environment_credentials(const std::string& url, http_options& opts) {
    if (!opts.bearer_token.empty()) return;
    http::url u;
    try {
        u = http::parse_url(url);
    } catch (const error&) {
        return;  // open_url reports bad URLs; hf:// is not an http URL
    }
    if (!stores::is_hub_origin(u)) return;
    opts.bearer_token = stores::implicit_hub_token();
}

}  // namespace ringsafe
