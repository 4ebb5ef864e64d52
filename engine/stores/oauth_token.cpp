#include "stores/oauth_token.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>

#include <boost/json.hpp>

#include "ringsafe/error.hpp"

namespace ringsafe::stores {
namespace {

using clock = std::chrono::steady_clock;
namespace json = boost::json;

// Printable ASCII of `s`, at most 200 characters (an error text from a server, for messages).
std::string printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 200)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
    return out;
}

const json::string* string_field(const json::object& o, std::string_view name) {
    auto it = o.find(name);
    return it != o.end() && it->value().is_string() ? &it->value().get_string() : nullptr;
}

class oauth_token final : public http::credential_source {
public:
    oauth_token(std::function<http::small_request()> make, std::string what)
        : make_(std::move(make)), what_(std::move(what)) {}

    http::net::awaitable<http::header_fields> fields(http::connection_pool& pool,
                                                                   const http_options& o,
                                                                   detail::abandon_list* abandon) override {
        {
            std::lock_guard lock(mutex_);
            const auto now = clock::now();
            // Another loop is fetching a new one: this one is still valid.
            if (!token_.empty() && (now < refresh_at_ || (refreshing_ && now < expires_at_))) co_return bearer(token_);
            refreshing_ = true;
        }
        std::string token;
        try {
            token = co_await fetch(pool, o, abandon);
        } catch (...) {
            std::lock_guard lock(mutex_);
            refreshing_ = false;
            throw;
        }
        co_return bearer(token);
    }

private:
    static http::header_fields bearer(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }

    http::net::awaitable<std::string> fetch(http::connection_pool& pool, const http_options& o,
                                                   detail::abandon_list* abandon) {
        const auto asked = clock::now();
        const http::small_response r = co_await http::exchange_small(pool, make_(), o, abandon, what_);
        json::value v;
        boost::system::error_code ec;
        v = json::parse(r.body, ec);
        const json::object* obj = !ec && v.is_object() ? &v.get_object() : nullptr;
        if (r.status != 200) {
            std::string detail;
            if (obj) {
                if (auto* e = string_field(*obj, "error")) detail = printable(*e);
                if (auto* d = string_field(*obj, "error_description")) detail += (detail.empty() ? "" : ": ") + printable(*d);
            }
            raise(errc::HttpError, what_ + " answered HTTP " + std::to_string(r.status) +
                                       (detail.empty() ? std::string() : " (" + detail + ")"));
        }
        const json::string* token = obj ? string_field(*obj, "access_token") : nullptr;
        if (!token || token->empty() ||
            std::any_of(token->begin(), token->end(), [](char c) { return c <= 0x20 || c >= 0x7f; }))
            raise(errc::HttpError, what_ + " answered without a usable access_token");
        std::int64_t lifetime = 3600;  // RFC 6749: expires_in is RECOMMENDED, not required
        if (auto it = obj->find("expires_in"); it != obj->end()) {
            if (it->value().is_int64()) lifetime = it->value().get_int64();
            else if (it->value().is_uint64()) lifetime = static_cast<std::int64_t>(std::min<std::uint64_t>(it->value().get_uint64(), 1u << 30));
            else if (it->value().is_double()) lifetime = static_cast<std::int64_t>(it->value().get_double());
        }
        lifetime = std::max<std::int64_t>(lifetime, 0);
        const std::chrono::seconds life(lifetime), early(std::min<std::int64_t>(225, lifetime / 2));
        std::lock_guard lock(mutex_);
        token_ = std::string(*token);
        expires_at_ = asked + life;
        refresh_at_ = lifetime > 0 ? expires_at_ - early : asked;
        refreshing_ = false;
        co_return token_;
    }

    std::function<http::small_request()> make_;
    std::string what_;
    std::mutex mutex_;
    std::string token_;
    clock::time_point expires_at_{}, refresh_at_{};
    bool refreshing_ = false;
};

}  // namespace

std::shared_ptr<http::credential_source> oauth_token_source(std::function<http::small_request()> make,
                                                                  std::string what) {
    return std::make_shared<oauth_token>(std::move(make), std::move(what));
}

}  // namespace ringsafe::stores
