#include "stores/azure_object.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <vector>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "http/http_settings.hpp"
#include "ringsafe/error.hpp"
#include "stores/locate.hpp"
#include "stores/object_path.hpp"

namespace ringsafe::stores {
namespace {

std::string azure_env(const char* name) {
    const char* v = std::getenv(name);
    return v ? v : "";
}

std::string lower(std::string_view s) {
    std::string r(s);
    std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return r;
}

std::string trim(std::string_view s) {
    const auto a = s.find_first_not_of(" \t");
    if (a == std::string_view::npos) return "";
    return std::string(s.substr(a, s.find_last_not_of(" \t") - a + 1));
}

// Standard base64 (with padding) -> bytes; false when malformed.
bool base64_decode(std::string_view in, std::string& out) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    if (in.empty() || in.size() % 4) return false;
    out.clear();
    for (std::size_t i = 0; i < in.size(); i += 4) {
        int v[4];
        int pad = 0;
        for (int k = 0; k < 4; ++k) {
            const char c = in[i + k];
            if (c == '=' && i + 4 == in.size() && k >= 2) {
                v[k] = 0;
                ++pad;
            } else if (pad || (v[k] = value(c)) < 0) {
                return false;
            }
        }
        const unsigned n = static_cast<unsigned>(v[0] << 18 | v[1] << 12 | v[2] << 6 | v[3]);
        out += static_cast<char>(n >> 16);
        if (pad < 2) out += static_cast<char>((n >> 8) & 255);
        if (pad < 1) out += static_cast<char>(n & 255);
    }
    return true;
}

std::string base64_encode(const unsigned char* p, std::size_t n) {
    std::string out(4 * ((n + 2) / 3) + 1, '\0');
    const int len = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), p, static_cast<int>(n));
    out.resize(static_cast<std::size_t>(len));
    return out;
}

std::string percent_decode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

// Fields of a connection string ("Name=value;..."), names lower-cased; a value keeps its '='.
std::map<std::string, std::string> connection_fields(std::string_view text, const std::string& spec) {
    std::map<std::string, std::string> f;
    while (!text.empty()) {
        const auto semi = text.find(';');
        const std::string_view part = text.substr(0, semi);
        text = semi == std::string_view::npos ? std::string_view{} : text.substr(semi + 1);
        if (trim(part).empty()) continue;
        const auto eq = part.find('=');
        if (eq == std::string_view::npos || trim(part.substr(0, eq)).empty())
            raise(errc::InvalidArgument, "the Azure storage connection string is malformed (a part is not Name=value), opening " + spec);
        f[lower(trim(part.substr(0, eq)))] = trim(part.substr(eq + 1));
    }
    return f;
}

// The account of an Azure Blob host: its first label.
std::string account_of_host(std::string_view host) { return std::string(host.substr(0, host.find('.'))); }

constexpr std::string_view blob_suffixes[] = {".blob.core.windows.net", ".blob.core.chinacloudapi.cn",
                                              ".blob.core.usgovcloudapi.net", ".blob.core.cloudapi.de"};

// A SAS token as the query it is appended as (never re-encoded).
std::string sas_query(std::string sas, const char* what, const std::string& spec) {
    if (!sas.empty() && sas.front() == '?') sas.erase(0, 1);
    for (char c : sas)
        if (static_cast<unsigned char>(c) <= 0x20 || c == '#' || static_cast<unsigned char>(c) >= 0x7f)
            raise(errc::InvalidArgument, std::string(what) + " holds a character a URL cannot carry (opening " + spec + ")");
    return sas;
}

// The remote object at `u` (an http(s) URL of a blob) for `account`, signed per `o`.
http_engine::remote_object blob_object(http_engine::url u, const std::string& account, const azure_options& o, bool url_has_sas,
                                       const std::string& spec) {
    http_engine::remote_object obj;
    const std::string version = o.api_version;
    std::string key;
    if (!o.anonymous && !url_has_sas && !o.key.empty()) {
        if (account.empty()) raise(errc::InvalidArgument, "an Azure storage key is set but no account name, for " + spec);
        if (!base64_decode(o.key, key))
            raise(errc::InvalidArgument, "the Azure storage key is not base64 (as the portal shows it), for " + spec);
        key = o.key;
    } else if (!o.anonymous && !url_has_sas && !o.sas_token.empty()) {
        const std::string sas = sas_query(o.sas_token, "the Azure SAS token", spec);
        u.target += (u.target.find('?') == std::string::npos ? "?" : "&") + sas;
    }
    obj.requested = obj.location = u;
    obj.sign = [account, key, version](const http_engine::url& target, std::string_view range,
                                       const http_engine::header_fields& fields) {
        http_engine::header_fields out{{"x-ms-version", version}};
        if (key.empty()) return out;
        out.emplace_back("x-ms-date", azure_date(std::time(nullptr)));
        http_engine::header_fields all = fields;
        all.insert(all.end(), out.begin(), out.end());
        out.emplace_back("Authorization", azure_shared_key_authorization(account, key, azure_string_to_sign(target, account, range, all)));
        return out;
    };
    return obj;
}

}  // namespace

azure_options resolve_azure_options(const azure_options& given, const std::string& spec) {
    azure_options o = given;
    std::string conn = o.connection_string.empty() ? azure_env("AZURE_STORAGE_CONNECTION_STRING") : o.connection_string;
    std::string protocol = "https", suffix = "core.windows.net";
    if (!conn.empty()) {
        auto f = connection_fields(conn, spec);
        auto take = [&](std::string& field, const char* name) {
            if (field.empty()) field = f[name];
        };
        take(o.account, "accountname");
        take(o.key, "accountkey");
        take(o.sas_token, "sharedaccesssignature");
        take(o.endpoint, "blobendpoint");
        if (!f["defaultendpointsprotocol"].empty()) protocol = lower(f["defaultendpointsprotocol"]);
        if (!f["endpointsuffix"].empty()) suffix = f["endpointsuffix"];
        if (f.count("usedevelopmentstorage") && lower(f["usedevelopmentstorage"]) == "true")
            raise(errc::InvalidArgument, "UseDevelopmentStorage=true names no endpoint ringsafe can reach; give "
                                         "AccountName, AccountKey and BlobEndpoint instead (opening " + spec + ")");
    }
    for (const char* var : {"AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_ACCOUNT_NAME"})
        if (o.account.empty()) o.account = azure_env(var);
    for (const char* var : {"AZURE_STORAGE_KEY", "AZURE_STORAGE_ACCOUNT_KEY"})
        if (o.key.empty()) o.key = azure_env(var);
    if (o.sas_token.empty()) o.sas_token = azure_env("AZURE_STORAGE_SAS_TOKEN");
    if (o.api_version.empty()) o.api_version = std::string(default_azure_api_version);
    if (protocol != "http" && protocol != "https")
        raise(errc::InvalidArgument, "the connection string's DefaultEndpointsProtocol is neither http nor https (opening " + spec + ")");
    if (o.endpoint.empty() && !o.account.empty()) o.endpoint = protocol + "://" + o.account + ".blob." + suffix;
    http_engine::check_field_value(o.account, "the Azure storage account", spec);
    http_engine::check_field_value(o.api_version, "the Azure API version", spec);
    for (char c : o.account)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-')
            raise(errc::InvalidArgument, "the Azure storage account name '" + o.account + "' is not letters and digits (opening " + spec + ")");
    return o;
}

bool is_azure_blob_host(std::string_view host) {
    return std::any_of(std::begin(blob_suffixes), std::end(blob_suffixes), [&](std::string_view s) {
        return host.size() > s.size() && host.ends_with(s);
    });
}

std::string azure_date(std::time_t now) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    static constexpr const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                             "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    char buf[40];
    std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon],
                  tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return buf;
}

std::string azure_string_to_sign(const http_engine::url& target, std::string_view account, std::string_view range,
                                 const http_engine::header_fields& fields) {
    auto value = [&](std::string_view name) {
        for (auto& [k, v] : fields)
            if (lower(k) == name) return trim(v);
        return std::string();
    };
    std::string s = "GET\n";
    for (std::string_view name : {"content-encoding", "content-language", "content-length", "content-md5", "content-type",
                                  "date", "if-modified-since", "if-match", "if-none-match", "if-unmodified-since"}) {
        std::string v = value(name);
        if (name == "content-length" && v == "0") v.clear();
        s.append(v).append("\n");
    }
    s.append(range).append("\n");
    std::vector<std::pair<std::string, std::string>> ms;
    for (auto& [k, v] : fields)
        if (lower(k).starts_with("x-ms-")) ms.emplace_back(lower(k), trim(v));
    std::sort(ms.begin(), ms.end());
    for (auto& [k, v] : ms) s.append(k).append(":").append(v).append("\n");
    const auto q = target.target.find('?');
    s.append("/").append(account).append(target.target.substr(0, q));
    if (q != std::string::npos) {
        std::map<std::string, std::vector<std::string>> params;
        std::string_view query = std::string_view(target.target).substr(q + 1);
        while (!query.empty()) {
            const auto amp = query.find('&');
            const std::string_view p = query.substr(0, amp);
            query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
            if (p.empty()) continue;
            const auto eq = p.find('=');
            params[lower(percent_decode(p.substr(0, eq)))].push_back(
                eq == std::string_view::npos ? std::string() : percent_decode(p.substr(eq + 1)));
        }
        for (auto& [name, values] : params) {
            std::sort(values.begin(), values.end());
            s.append("\n").append(name).append(":");
            for (std::size_t i = 0; i < values.size(); ++i) s.append(i ? "," : "").append(values[i]);
        }
    }
    return s;
}

std::string azure_shared_key_authorization(std::string_view account, std::string_view key_base64, std::string_view string_to_sign) {
    std::string key;
    if (!base64_decode(key_base64, key)) raise(errc::InvalidArgument, "the Azure storage key is not base64");
    unsigned char md[32];
    unsigned int n = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(string_to_sign.data()),
         string_to_sign.size(), md, &n);
    return "SharedKey " + std::string(account) + ":" + base64_encode(md, n);
}

http_engine::remote_object locate_azure(const std::string& spec, const http_options& opts) {
    const object_path p = split_object_url(spec, "az");
    const azure_options o = resolve_azure_options(opts.azure, spec);
    if (o.endpoint.empty())
        raise(errc::InvalidArgument, "no Azure storage account for " + spec +
                                         ": set AZURE_STORAGE_ACCOUNT (or AZURE_STORAGE_CONNECTION_STRING, or azure_options)");
    http_engine::url u;
    try {
        u = http_engine::parse_url(o.endpoint);
    } catch (const error&) {
        raise(errc::InvalidArgument, "the Azure blob endpoint '" + o.endpoint + "' is not an http(s) URL (opening " + spec + ")");
    }
    if ((u.scheme != "http" && u.scheme != "https") || u.target.find('?') != std::string::npos)
        raise(errc::InvalidArgument, "the Azure blob endpoint '" + o.endpoint + "' is not an http(s) URL (opening " + spec + ")");
    std::string base = u.target == "/" ? "" : u.target;
    if (!base.empty() && base.back() == '/') base.pop_back();
    u.target = base + "/" + p.bucket + "/" + http_engine::uri_encode(p.object, true);
    return blob_object(u, o.account.empty() ? account_of_host(u.host) : o.account, o, false, spec);
}

http_engine::remote_object locate_azure_url(const std::string& spec, const http_options& opts) {
    http_engine::url u = http_engine::parse_url(spec);
    const std::string account = account_of_host(u.host);
    azure_options o = resolve_azure_options(opts.azure, spec);
    const auto q = u.target.find('?');
    std::string query;  // "&a=1&b=2": appended piecewise, as '+' chains trip g++ 12's -Wrestrict (GCC bug 105329)
    if (q != std::string::npos) query.append("&").append(u.target, q + 1);
    const bool url_has_sas = query.find("&sig=") != std::string::npos;
    if (!o.account.empty() && lower(o.account) != account) {  // credentials of another account never go here
        o.key.clear();
        o.sas_token.clear();
    }
    return blob_object(u, account, o, url_has_sas, spec);
}

}  // namespace ringsafe::stores
