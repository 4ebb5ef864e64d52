// http_options: connections, event loops and request size (with their
// environment variables), and the checks on caller-supplied header fields.
#include "http/http_settings.hpp"

#include <algorithm>
#include <string_view>
#include <thread>

#include "http/ascii_case.hpp"
#include "http/environment.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe {
namespace {

// "4096", "4K", "4KiB", "16M", "1G" (binary multiples); false when malformed or overflowing.
bool parse_size(std::string_view t, std::uint64_t& out) {
    std::uint64_t n = 0;
    std::size_t i = 0;
    for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i) {
        if (n > (UINT64_MAX - 9) / 10) return false;
        n = n * 10 + static_cast<unsigned>(t[i] - '0');
    }
    if (i == 0) return false;
    std::string_view unit = t.substr(i);
    if (unit.ends_with("iB")) unit.remove_suffix(2);
    else if (unit.size() == 2 && unit.ends_with("B")) unit.remove_suffix(1);
    unsigned shift = 0;
    if (unit.empty()) shift = 0;
    else if (unit == "K" || unit == "k") shift = 10;
    else if (unit == "M" || unit == "m") shift = 20;
    else if (unit == "G" || unit == "g") shift = 30;
    else return false;
    if (shift && n > (UINT64_MAX >> shift)) return false;
    out = n << shift;
    return true;
}

// The value of environment variable `name`, parsed as a size (or a plain
// number when !sizes); 0 when unset or empty.
std::uint64_t from_environment(const char* name, bool sizes) {
    const std::string v = http::env_text(name);
    if (v.empty()) return 0;
    std::uint64_t n = 0;
    std::string_view text(v);
    const bool digits_only = text.find_first_not_of("0123456789") == std::string_view::npos;
    if ((!sizes && !digits_only) || !parse_size(text, n) || n == 0)
        raise(errc::InvalidArgument, std::string(name) + "='" + v + "' is not " +
                                         (sizes ? "a size (e.g. 8M, 64M, 1G)" : "a positive number"));
    return n;
}

// A count the caller left 0 (`field`, named `field_name`): environment
// variable `var` when set (a positive number, at most `max`: InvalidArgument
// naming `var` otherwise), else `fallback`. Returns the name of where the
// count came from: `var` when the environment gave it, else `field_name`.
const char* count_from_env(unsigned& field, const char* field_name, const char* var, unsigned max, unsigned fallback) {
    if (field != 0) return field_name;
    const std::uint64_t env = from_environment(var, false);
    if (!env) {
        field = fallback;
        return field_name;
    }
    if (env > max)
        raise(errc::InvalidArgument, std::string(var) + "=" + std::to_string(env) + " is out of range 1.." +
                                         std::to_string(max));
    field = static_cast<unsigned>(env);
    return var;
}

}  // namespace

http_options resolved_http_options(const http_options& o) {
    http_options r = o;
    const char* chunk_from = "chunk_size";
    const char* conn_from = count_from_env(r.connections_per_origin, "connections_per_origin", "RINGSAFE_CONNECTIONS",
                                           max_connections_per_origin, default_connections_per_origin);
    const char* threads_from = count_from_env(r.threads, "threads", "RINGSAFE_HTTP_THREADS", max_http_threads,
                                              std::clamp(std::thread::hardware_concurrency(), 1u, max_http_threads));
    if (r.threads > max_http_threads)
        raise(errc::InvalidArgument, std::string(threads_from) + " " + std::to_string(r.threads) +
                                         " is out of range 1.." + std::to_string(max_http_threads));
    if (r.chunk_size == 0) {
        const std::uint64_t env = from_environment("RINGSAFE_CHUNK", true);
        chunk_from = env ? "RINGSAFE_CHUNK" : chunk_from;
        r.chunk_size = env ? env : default_http_chunk_size;
    }
    if (r.connections_per_origin > max_connections_per_origin)
        raise(errc::InvalidArgument, std::string(conn_from) + " " + std::to_string(r.connections_per_origin) +
                                         " is out of range 1.." + std::to_string(max_connections_per_origin));
    if (r.chunk_size < min_http_chunk_size || r.chunk_size > max_http_chunk_size)
        raise(errc::InvalidArgument, std::string(chunk_from) +
                                         (o.chunk_size ? " " : "='" + http::env_text("RINGSAFE_CHUNK") + "' = ") +
                                         std::to_string(r.chunk_size) +
                                         " is out of range " + std::to_string(min_http_chunk_size) + ".." +
                                         std::to_string(max_http_chunk_size) + " bytes (4 KiB..1 GiB)");
    r.threads = std::min(r.threads, r.connections_per_origin);  // a loop without a connection has nothing to do
    return r;
}

namespace http {
namespace {

bool has_control(std::string_view v) { return v.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos; }

// RFC 9110 token characters (a field name).
bool is_token(std::string_view name) {
    if (name.empty()) return false;
    for (unsigned char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
        if (!ok) return false;
    }
    return true;
}

}  // namespace

void check_field_value(std::string_view value, const char* what, const std::string& url) {
    if (has_control(value))
        raise(errc::InvalidArgument, std::string(what) + " for " + url +
                                         " holds CR, LF or NUL (refused: it would split the request)");
}

void check_request_fields(const http_options& o, const std::string& url) {
    for (const auto& [name, value] : o.headers) {
        if (!is_token(name))
            raise(errc::InvalidArgument, "header name '" + printable(name) + "' for " + url +
                                             " is not a valid HTTP field name (empty, or holds a space, "
                                             "colon, CR, LF, NUL or another separator)");
        if (has_control(value))
            raise(errc::InvalidArgument, "the value of header '" + name + "' for " + url +
                                             " holds CR, LF or NUL (refused: it would split the request)");
    }
    check_field_value(o.bearer_token, "the bearer token", url);
}

}  // namespace http
}  // namespace ringsafe
