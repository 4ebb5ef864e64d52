// Azure Storage Shared Key (shared_key.hpp).
#include "stores/shared_key.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "http/ascii_case.hpp"
#include "ringsafe/error.hpp"
#include "stores/digest.hpp"

namespace ringsafe::stores {

using http::lower;
using http::trim;

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

std::string azure_string_to_sign(const http::url& target, std::string_view account, std::string_view range,
                                 const http::header_fields& fields) {
    auto value = [&](std::string_view name) { return trim(http::field_value(fields, name)); };
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
    const http::target_parts t = http::split_target(target.target);
    s.append("/").append(account).append(t.path);
    std::map<std::string, std::vector<std::string>> params;  // the query's parameters, decoded, sorted
    for (const http::query_parameter& p : http::query_parameters(t.query))
        params[lower(http::percent_decode(p.name))].push_back(http::percent_decode(p.value));
    for (auto& [name, values] : params) {
        std::sort(values.begin(), values.end());
        s.append("\n").append(name).append(":");
        for (std::size_t i = 0; i < values.size(); ++i) s.append(i ? "," : "").append(values[i]);
    }
    return s;
}

std::string azure_shared_key_authorization(std::string_view account, std::string_view key_base64, std::string_view string_to_sign) {
    std::string key;
    if (!from_base64(key_base64, key)) raise(errc::InvalidArgument, "the Azure storage key is not base64");
    return "SharedKey " + std::string(account) + ":" + base64(hmac_sha256(key, string_to_sign));
}

}  // namespace ringsafe::stores
