// The options of URL sources (http_flags.hpp).
#include "http_flags.hpp"

#include <chrono>
#include <string>

namespace ringsafe::cli {

void declare_http_flags(arg_parser& p, bool chunk) {
    p.option("--connections");
    p.option("--http-threads");
    p.option("--cross-origin-header");
    p.flag("--allow-downgrade");
    p.option("--speed-limit");
    p.option("--speed-time");
    p.option("--endpoint-url");
    p.flag("--anonymous");
    p.flag("--cache");
    p.flag("--no-verify");
    if (chunk) p.option("--chunk");
}

void apply_http_flags(const arg_parser& p, http_options& o, store_options& st) {
    if (p.has("--connections")) {
        const std::uint64_t n = p.uint_or("--connections", 0);
        if (n < 1 || n > max_connections_per_origin)
            throw usage_error{"--connections " + std::to_string(n) + " is out of range 1.." +
                              std::to_string(max_connections_per_origin)};
        o.connections_per_origin = static_cast<unsigned>(n);
    }
    if (p.has("--http-threads")) {
        const std::uint64_t n = p.uint_or("--http-threads", 0);
        if (n < 1 || n > max_http_threads)
            throw usage_error{"--http-threads " + std::to_string(n) + " is out of range 1.." +
                              std::to_string(max_http_threads)};
        o.threads = static_cast<unsigned>(n);
    }
    if (p.has("--chunk")) {
        const std::uint64_t n = p.size_or("--chunk", 0);
        if (n < min_http_chunk_size || n > max_http_chunk_size)
            throw usage_error{"--chunk " + *p.value("--chunk") + " is out of range 4K..1G"};
        o.chunk_size = n;
    }
    for (auto& name : p.values("--cross-origin-header")) o.cross_origin_headers.push_back(name);
    if (p.has("--allow-downgrade")) o.allow_https_downgrade = true;
    if (p.has("--cache")) st.hub.cache = true;
    if (p.has("--no-verify")) st.hub.verify = hub_options::verification::never;
    if (p.has("--speed-limit")) o.low_speed_limit = p.size_or("--speed-limit", 0);
    if (p.has("--speed-time")) {
        const std::uint64_t s = p.uint_or("--speed-time", 0);
        if (s < 1 || s > 86400) throw usage_error{"--speed-time " + std::to_string(s) + " is out of range 1..86400"};
        o.low_speed_time = std::chrono::seconds(s);
    }
    if (auto ep = p.value("--endpoint-url")) set_store_endpoint(st, *ep);
    if (p.has("--anonymous")) set_anonymous(st);
}

}  // namespace ringsafe::cli
