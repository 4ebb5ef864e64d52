// The one source dispatcher: open_source, prepare_source and is_url pick the
// source kind from the spec. A new kind is one line in each of them.
#include "ringsafe/open_source.hpp"

#include <array>
#include <cctype>

#include "ringsafe/error.hpp"
#include "source/deferred_open.hpp"
#include "source/kinds.hpp"

namespace ringsafe {

bool is_url(std::string_view spec) noexcept {
    static constexpr std::array<std::string_view, 3> schemes{"http://", "https://", "s3://"};
    for (std::string_view s : schemes) {
        if (spec.size() < s.size()) continue;
        bool same = true;
        for (std::size_t i = 0; i < s.size() && same; ++i)
            same = std::tolower(static_cast<unsigned char>(spec[i])) == s[i];
        if (same) return true;
    }
    return false;
}

std::unique_ptr<source> open_source(const std::string& spec, const source_options& opts) {
    if (is_url(spec)) return open_url(spec, opts.http);
    return open_file(spec, opts.file);
}

namespace detail {

std::unique_ptr<source> prepare_source(const std::string& spec, const source_options& opts) {
    if (is_url(spec)) return http_engine::prepare_url(spec, opts.http);
    return nullptr;
}

deferred_open& deferred_side(source& src) { return dynamic_cast<deferred_open&>(src); }

}  // namespace detail
}  // namespace ringsafe
