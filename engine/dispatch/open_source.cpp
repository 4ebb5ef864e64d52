// The one source dispatcher: open_source, open_url, is_url and prepare_source
// pick the source kind from the spec. A URL's scheme picks the store that
// locates its object (engine/stores) or, for a store that opens its own
// sources (the Hub), answers with a source or a local file (its cache); a new
// scheme is one line in url_schemes.
#include "ringsafe/open_source.hpp"

#include <array>

#include "dispatch/prepare_source.hpp"
#include "http/ascii_case.hpp"
#include "http/http_source.hpp"
#include "ringsafe/error.hpp"
#include "stores/locate.hpp"
#include "uring/file_source.hpp"

namespace ringsafe {
namespace {

struct url_scheme {
    std::string_view prefix;  // lower case, with "://"
    http::remote_object (*locate)(const std::string& url, const http_options& opts);
    // A store that opens its own sources (the Hub: its cache's files, commit pinning), instead of locate.
    stores::store_answer (*open)(const std::string& url, const http_options& opts, bool deferred) = nullptr;
};

constexpr std::array<url_scheme, 6> url_schemes{{
    {"http://", stores::locate_http},
    {"https://", stores::locate_http},
    {"s3://", stores::locate_s3},
    {"gs://", stores::locate_gcs},
    {"az://", stores::locate_azure},
    {"hf://", nullptr, stores::open_hub},
}};

// The scheme `spec` starts with (any case), or null for a local path.
const url_scheme* scheme_of(std::string_view spec) noexcept {
    for (const url_scheme& s : url_schemes)
        if (http::starts_with_icase(spec, s.prefix)) return &s;
    return nullptr;
}

}  // namespace

bool is_url(std::string_view spec) noexcept { return scheme_of(spec) != nullptr; }

namespace {

// A URL of a store that opens its own sources: its source, or its local file.
std::unique_ptr<source> open_store(const url_scheme& s, const std::string& url, const source_options& opts) {
    stores::store_answer a = s.open(url, opts.http, false);
    if (a.src) return std::move(a.src);
    return uring::open_file_named(a.local_file, a.name, opts.file);
}

}  // namespace

std::unique_ptr<source> open_url(const std::string& url, const http_options& opts) {
    const url_scheme* s = scheme_of(url);
    if (!s) return http::open_remote(url, stores::locate_http(url, opts), opts);  // parse_url names what is wrong
    if (s->open) return open_store(*s, url, source_options{file_options{}, opts});
    return http::open_remote(url, s->locate(url, opts), opts);
}

std::unique_ptr<source> open_source(const std::string& spec, const source_options& opts) {
    if (const url_scheme* s = scheme_of(spec); s && s->open) return open_store(*s, spec, opts);
    if (is_url(spec)) return open_url(spec, opts.http);
    return open_file(spec, opts.file);
}

namespace dispatch {

prepared_source prepare_source(const std::string& spec, const source_options& opts) {
    const url_scheme* s = scheme_of(spec);
    if (!s) return {nullptr, spec, spec};
    if (!s->open) return {http::prepare_remote(spec, s->locate(spec, opts.http), opts.http), {}, {}};
    stores::store_answer a = s->open(spec, opts.http, true);
    return {std::move(a.src), std::move(a.local_file), std::move(a.name)};
}

}  // namespace dispatch
}  // namespace ringsafe
