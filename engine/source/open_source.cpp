// The one source dispatcher: open_source, prepare_source, open_url and is_url
// pick the source kind from the spec. A URL's scheme picks the store that
// locates its object (engine/stores); a new scheme is one line in url_schemes.
#include "ringsafe/open_source.hpp"

#include <array>
#include <cctype>

#include "ringsafe/error.hpp"
#include "source/deferred_open.hpp"
#include "source/kinds.hpp"
#include "stores/locate.hpp"

namespace ringsafe {
namespace {

struct url_scheme {
    std::string_view prefix;  // lower case, with "://"
    http_engine::remote_object (*locate)(const std::string& url, const http_options& opts);
};

constexpr std::array<url_scheme, 5> url_schemes{{
    {"http://", stores::locate_http},
    {"https://", stores::locate_http},
    {"s3://", stores::locate_s3},
    {"gs://", stores::locate_gcs},
    {"az://", stores::locate_azure},
}};

// The scheme `spec` starts with (any case), or null for a local path.
const url_scheme* scheme_of(std::string_view spec) noexcept {
    for (const url_scheme& s : url_schemes) {
        if (spec.size() < s.prefix.size()) continue;
        bool same = true;
        for (std::size_t i = 0; i < s.prefix.size() && same; ++i)
            same = std::tolower(static_cast<unsigned char>(spec[i])) == s.prefix[i];
        if (same) return &s;
    }
    return nullptr;
}

}  // namespace

bool is_url(std::string_view spec) noexcept { return scheme_of(spec) != nullptr; }

std::unique_ptr<source> open_url(const std::string& url, const http_options& opts) {
    const url_scheme* s = scheme_of(url);
    if (!s) return http_engine::open_remote(url, stores::locate_http(url, opts), opts);  // parse_url names what is wrong
    return http_engine::open_remote(url, s->locate(url, opts), opts);
}

std::unique_ptr<source> open_source(const std::string& spec, const source_options& opts) {
    if (is_url(spec)) return open_url(spec, opts.http);
    return open_file(spec, opts.file);
}

namespace detail {

std::unique_ptr<source> prepare_source(const std::string& spec, const source_options& opts) {
    if (const url_scheme* s = scheme_of(spec)) return http_engine::prepare_remote(spec, s->locate(spec, opts.http), opts.http);
    return nullptr;
}

deferred_open& deferred_side(source& src) { return dynamic_cast<deferred_open&>(src); }

}  // namespace detail
}  // namespace ringsafe
