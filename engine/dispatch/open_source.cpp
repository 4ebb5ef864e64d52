// The one source dispatcher: open_source, open_url, is_url and prepare_source
// pick the source kind from the spec. A URL's scheme picks the store that
// locates its object (engine/stores), which engine/http opens; a scheme with
// a cache (the Hub's) has the dispatcher apply that cache around its sources:
// a hit opens as a local file, a miss as the located object wrapped by the
// cache. A new scheme is one line in url_schemes.
#include "ringsafe/open_source.hpp"

#include <array>
#include <optional>

#include "dispatch/prepare_source.hpp"
#include "http/ascii_case.hpp"
#include "http/http_source.hpp"
#include "ringsafe/error.hpp"
#include "stores/hub/hub_cache_source.hpp"
#include "stores/hub/hub_locator.hpp"
#include "stores/locate.hpp"
#include "uring/file_source.hpp"

namespace ringsafe {
namespace {

struct url_scheme {
    std::string_view prefix;  // lower case, with "://"
    http::remote_object (*locate)(const std::string& url, const http_options& opts, const store_options& stores);
};

constexpr std::array<url_scheme, 6> url_schemes{{
    {"http://", stores::locate_http},
    {"https://", stores::locate_http},
    {"s3://", stores::locate_s3},
    {"gs://", stores::locate_gcs},
    {"az://", stores::locate_azure},
    {"hf://", stores::locate_hub},
}};

// A cache the dispatcher applies around a scheme's sources: `find` answers a
// URL it holds with a local file (opened as one, named by the answer), and
// `wrap` opens any other URL's located object as a source that uses the cache.
struct url_cache {
    std::string_view prefix;  // lower case, with "://"
    std::optional<stores::hub_cache_hit> (*find)(const std::string& url, const http_options& opts,
                                                 const store_options& stores);
    std::unique_ptr<source> (*wrap)(const std::string& url, http::remote_object located, const http_options& opts,
                                    const store_options& stores, bool deferred);
};

constexpr std::array<url_cache, 1> url_caches{{
    {"hf://", stores::find_hub_cached, stores::open_hub_cached},
}};

// The scheme `spec` starts with (any case), or null for a local path.
const url_scheme* scheme_of(std::string_view spec) noexcept {
    for (const url_scheme& s : url_schemes)
        if (http::starts_with_icase(spec, s.prefix)) return &s;
    return nullptr;
}

// The cache of the scheme `spec` starts with, or null.
const url_cache* cache_of(std::string_view spec) noexcept {
    for (const url_cache& c : url_caches)
        if (http::starts_with_icase(spec, c.prefix)) return &c;
    return nullptr;
}

}  // namespace

bool is_url(std::string_view spec) noexcept { return scheme_of(spec) != nullptr; }

namespace {

// A URL of a scheme with a cache: the cached file as a local file, else the located object through the cache.
std::unique_ptr<source> open_cached(const url_cache& c, const url_scheme& s, const std::string& url,
                                    const source_options& opts) {
    if (std::optional<stores::hub_cache_hit> hit = c.find(url, opts.http, opts.stores))
        return uring::open_file_named(hit->local_file, hit->name, opts.file);
    return c.wrap(url, s.locate(url, opts.http, opts.stores), opts.http, opts.stores, false);
}

}  // namespace

std::unique_ptr<source> open_url(const std::string& url, const http_options& opts, const store_options& store_opts) {
    const url_scheme* s = scheme_of(url);
    if (!s) return http::open_remote(url, stores::locate_http(url, opts, store_opts), opts);  // parse_url names what is wrong
    if (const url_cache* c = cache_of(url)) return open_cached(*c, *s, url, source_options{file_options{}, opts, store_opts});
    return http::open_remote(url, s->locate(url, opts, store_opts), opts);
}

std::unique_ptr<source> open_source(const std::string& spec, const source_options& opts) {
    if (const url_scheme* s = scheme_of(spec))
        if (const url_cache* c = cache_of(spec)) return open_cached(*c, *s, spec, opts);
    if (is_url(spec)) return open_url(spec, opts.http, opts.stores);
    return open_file(spec, opts.file);
}

namespace dispatch {

prepared_source prepare_source(const std::string& spec, const source_options& opts) {
    const url_scheme* s = scheme_of(spec);
    if (!s) return {nullptr, spec, spec};
    const url_cache* c = cache_of(spec);
    if (!c) return {http::prepare_remote(spec, s->locate(spec, opts.http, opts.stores), opts.http), {}, {}};
    if (std::optional<stores::hub_cache_hit> hit = c->find(spec, opts.http, opts.stores))
        return {nullptr, std::move(hit->local_file), std::move(hit->name)};
    return {c->wrap(spec, s->locate(spec, opts.http, opts.stores), opts.http, opts.stores, true), {}, {}};
}

}  // namespace dispatch
}  // namespace ringsafe
