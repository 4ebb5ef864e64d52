#include "http/url.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

#include "http/ascii_case.hpp"
#include "ringsafe/error.hpp"

namespace ringsafe::http {
namespace {

bool is_unreserved(unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

// Characters allowed verbatim in a request target besides unreserved ones.
bool is_target_char(unsigned char c) {
    static constexpr std::string_view extra = "!$&'()*+,;=:@/?";
    return is_unreserved(c) || extra.find(static_cast<char>(c)) != std::string_view::npos;
}

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

void append_escape(std::string& out, unsigned char c) {
    static constexpr char hex[] = "0123456789ABCDEF";
    out += '%';
    out += hex[c >> 4];
    out += hex[c & 15];
}

// Keeps valid %XX escapes and target characters, escapes everything else.
std::string normalize_target(std::string_view t) {
    std::string out;
    out.reserve(t.size());
    for (std::size_t i = 0; i < t.size(); ++i) {
        auto c = static_cast<unsigned char>(t[i]);
        if (c == '%' && i + 2 < t.size() && is_hex(t[i + 1]) && is_hex(t[i + 2]))
            out += '%';
        else if (is_target_char(c))
            out += static_cast<char>(c);
        else
            append_escape(out, c);
    }
    return out;
}

// Removes "." and ".." segments of an absolute path (RFC 3986 5.2.4).
std::string remove_dot_segments(std::string_view path) {
    std::vector<std::string_view> segs;
    std::size_t i = 1;  // path starts with '/'
    bool trailing = false;
    while (i <= path.size()) {
        std::size_t j = path.find('/', i);
        if (j == std::string_view::npos) j = path.size();
        std::string_view seg = path.substr(i, j - i);
        trailing = false;
        if (seg == "..") {
            if (!segs.empty()) segs.pop_back();
            trailing = true;
        } else if (seg == ".") {
            trailing = true;
        } else {
            segs.push_back(seg);
        }
        i = j + 1;
    }
    std::string out;
    for (auto s : segs) out += '/', out += s;
    if (trailing || out.empty()) out += '/';
    return out;
}

}  // namespace

void invalid_url(std::string_view text, const std::string& why) {
    raise(errc::InvalidArgument, "invalid URL '" + std::string(text) + "': " + why);
}

std::string percent_decode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
            out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

target_parts split_target(std::string_view target) {
    const auto q = target.find('?');
    if (q == std::string_view::npos) return {target, {}};
    return {target.substr(0, q), target.substr(q + 1)};
}

std::vector<query_parameter> query_parameters(std::string_view query) {
    std::vector<query_parameter> out;
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view p = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        if (p.empty()) continue;
        const auto eq = p.find('=');
        if (eq == std::string_view::npos) out.push_back({p, {}, false});
        else out.push_back({p.substr(0, eq), p.substr(eq + 1), true});
    }
    return out;
}

void append_query(url& u, std::string_view parameter) {
    u.target.append(u.target.find('?') == std::string::npos ? "?" : "&").append(parameter);
}

url below(url endpoint, std::string_view path) {
    std::string base(split_target(endpoint.target).path);
    while (!base.empty() && base.back() == '/') base.pop_back();
    endpoint.target = base + "/" + std::string(path);
    return endpoint;
}

std::uint16_t default_port(std::string_view scheme) { return scheme == "http" ? 80 : 443; }

std::string url::authority() const {
    std::string a;  // appended piecewise: '+' chains trip g++ 12's -Wrestrict (GCC bug 105329)
    if (ipv6) a.append("[").append(host).append("]");
    else a = host;
    if (port != default_port(scheme)) a.append(":").append(std::to_string(port));
    return a;
}

std::string url::origin() const { return scheme + "://" + authority(); }

std::string url::shown() const { return without_url_secrets(str()); }

std::string uri_encode(std::string_view raw, bool keep_slash) {
    std::string out;
    out.reserve(raw.size());
    for (char ch : raw) {
        auto c = static_cast<unsigned char>(ch);
        if (is_unreserved(c) || (keep_slash && c == '/'))
            out += ch;
        else
            append_escape(out, c);
    }
    return out;
}

url_parts split_url(std::string_view text) {
    const auto colon = text.find("://");
    if (colon == std::string_view::npos) invalid_url(text, "expected scheme://host/path");
    std::string_view rest = text.substr(colon + 3);
    if (auto hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
    const std::size_t end = rest.find_first_of("/?");
    return {text.substr(0, colon), rest.substr(0, end), end == std::string_view::npos ? std::string_view{} : rest.substr(end)};
}

url_host parse_authority(std::string_view auth, std::string_view text) {
    url_host u;
    if (auth.find('@') != std::string_view::npos) invalid_url(text, "credentials in the URL are not supported (use a bearer token)");
    std::string_view host = auth, port_text;
    if (!auth.empty() && auth.front() == '[') {
        auto close = auth.find(']');
        if (close == std::string_view::npos) invalid_url(text, "unterminated IPv6 literal");
        host = auth.substr(1, close - 1);
        std::string_view after = auth.substr(close + 1);
        if (!after.empty()) {
            if (after.front() != ':') invalid_url(text, "unexpected characters after IPv6 literal");
            port_text = after.substr(1);
        }
        if (host.empty() || host.find_first_not_of("0123456789abcdefABCDEF:.") != std::string_view::npos)
            invalid_url(text, "invalid IPv6 literal");
        u.ipv6 = true;
    } else if (auto c = auth.rfind(':'); c != std::string_view::npos) {
        host = auth.substr(0, c);
        port_text = auth.substr(c + 1);
    }
    if (host.empty()) invalid_url(text, "missing host");
    if (!u.ipv6) {
        for (char c : host)
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_'))
                invalid_url(text, "invalid character in host name");
    }
    u.host = lower(host);
    if (!port_text.empty()) {
        if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string_view::npos)
            invalid_url(text, "invalid port '" + std::string(port_text) + "'");
        unsigned long p = std::stoul(std::string(port_text));
        if (p == 0 || p > 65535) invalid_url(text, "port out of range");
        u.port = static_cast<std::uint16_t>(p);
    }
    return u;
}

url parse_url(std::string_view text) {
    const url_parts parts = split_url(text);
    url u;
    u.scheme = lower(parts.scheme);
    if (u.scheme != "http" && u.scheme != "https")
        invalid_url(text, "unsupported scheme '" + u.scheme + "' (expected http or https)");
    url_host h = parse_authority(parts.authority, text);
    u.host = std::move(h.host);
    u.ipv6 = h.ipv6;
    u.port = h.port ? h.port : default_port(u.scheme);
    u.target = parts.target.empty() ? std::string("/") : normalize_target(parts.target);
    if (u.target.front() == '?') u.target = std::string("/").append(u.target);
    return u;
}

std::string_view location_scheme(std::string_view loc) {
    // RFC 3986 3.1: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":", before any '/', '?' or '#'.
    const auto colon = loc.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon > loc.find_first_of("/?#")) return {};
    if (!std::isalpha(static_cast<unsigned char>(loc[0]))) return {};
    for (char c : loc.substr(0, colon))
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') return {};
    return loc.substr(0, colon);
}

url resolve_location(const url& base, std::string_view loc) {
    if (const std::string scheme = lower(location_scheme(loc)); !scheme.empty()) {
        // Only http and https are followed, and an s3://, ftp:// or file: Location is the server's
        // doing: an HttpError naming both, not parse_url's InvalidArgument.
        if (scheme != "http" && scheme != "https")
            raise(errc::HttpError, "refused a redirect from " + base.shown() + " to '" + printable(loc) +
                                       "': only http and https Locations are followed");
        return parse_url(loc);
    }
    if (loc.starts_with("//")) return parse_url(base.scheme + ":" + std::string(loc));
    url u = base;
    if (auto hash = loc.find('#'); hash != std::string_view::npos) loc = loc.substr(0, hash);
    std::string ref = normalize_target(loc);
    const std::string base_path(split_target(base.target).path);
    if (ref.empty()) return u;
    if (ref.front() == '?') {
        u.target = base_path + ref;
        return u;
    }
    std::string query;
    if (auto q = ref.find('?'); q != std::string::npos) query = ref.substr(q), ref.resize(q);
    std::string path = ref.front() == '/' ? ref : base_path.substr(0, base_path.rfind('/') + 1) + ref;
    u.target = remove_dot_segments(path) + query;
    return u;
}

}  // namespace ringsafe::http
