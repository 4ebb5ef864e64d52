// AWS SigV4 and GOOG4 (sigv4.hpp).
#include "stores/sigv4.hpp"

#include <algorithm>

#include "http/url.hpp"

namespace ringsafe::stores {

sigv4_time sigv4_at(std::time_t now) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    char d[16], a[32];
    std::strftime(d, sizeof d, "%Y%m%d", &tm);
    std::strftime(a, sizeof a, "%Y%m%dT%H%M%SZ", &tm);
    return {d, a};
}

std::string sigv4_canonical_query(std::string_view query) {
    std::vector<std::string> params;
    for (const http::query_parameter& p : http::query_parameters(query))
        if (!p.name.empty() || !p.value.empty()) params.push_back(std::string(p.name).append("=").append(p.value));
    std::sort(params.begin(), params.end());
    std::string out;
    for (auto& p : params) out += (out.empty() ? "" : "&") + p;
    return out;
}

std::string sigv4_signed_headers(const signed_fields& fields) {
    std::string s;
    for (auto& f : fields) s += (s.empty() ? "" : ";") + f.first;
    return s;
}

std::string sigv4_canonical_request(std::string_view method, std::string_view target, const signed_fields& fields,
                                    std::string_view payload_hash) {
    const http::target_parts t = http::split_target(target);
    std::string c(method);
    c.append("\n").append(t.path).append("\n");
    c += sigv4_canonical_query(t.query);
    c += "\n";
    for (auto& f : fields) c.append(f.first).append(":").append(f.second).append("\n");
    c.append("\n").append(sigv4_signed_headers(fields)).append("\n").append(payload_hash);
    return c;
}

std::string sigv4_scope(const sigv4_algorithm& alg, const sigv4_key& key, const sigv4_time& t) {
    std::string s = t.date;
    s.append("/").append(key.region).append("/").append(key.service).append("/").append(alg.terminator);
    return s;
}

std::string sigv4_signature(const sigv4_algorithm& alg, const sigv4_key& key, const sigv4_time& t,
                            std::string_view canonical_request) {
    std::string to_sign(alg.name);
    to_sign.append("\n").append(t.stamp).append("\n").append(sigv4_scope(alg, key, t)).append("\n");
    to_sign += sha256_hex(canonical_request);
    std::string k = hmac_sha256(std::string(alg.key_prefix).append(key.secret), t.date);
    k = hmac_sha256(k, key.region);
    k = hmac_sha256(k, key.service);
    k = hmac_sha256(k, alg.terminator);
    return hex(hmac_sha256(k, to_sign));
}

std::string sigv4_authorization(const sigv4_algorithm& alg, const sigv4_key& key, const sigv4_time& t,
                                const signed_fields& fields, const std::string& signature) {
    std::string a(alg.name);
    a.append(" Credential=").append(key.access_key_id).append("/").append(sigv4_scope(alg, key, t));
    a.append(", SignedHeaders=").append(sigv4_signed_headers(fields)).append(", Signature=").append(signature);
    return a;
}

std::vector<std::pair<std::string, std::string>> sigv4_signed_get(const sigv4_algorithm& alg, const sigv4_key& key,
                                                                  std::string_view authority, std::string_view target,
                                                                  std::string_view session_token, std::time_t now) {
    static const std::string empty_hash = sha256_hex("");
    const sigv4_time t = sigv4_at(now);
    const std::string hash_field = std::string(alg.header_prefix) + "content-sha256";
    const std::string date_field = std::string(alg.header_prefix) + "date";
    signed_fields fields{{"host", std::string(authority)}, {hash_field, empty_hash}, {date_field, t.stamp}};
    if (!session_token.empty()) fields.emplace_back("x-amz-security-token", std::string(session_token));
    const std::string sig = sigv4_signature(alg, key, t, sigv4_canonical_request("GET", target, fields, empty_hash));
    std::vector<std::pair<std::string, std::string>> out{{date_field, t.stamp}, {hash_field, empty_hash}};
    if (!session_token.empty()) out.emplace_back("x-amz-security-token", std::string(session_token));
    out.emplace_back("Authorization", sigv4_authorization(alg, key, t, fields, sig));
    return out;
}

}  // namespace ringsafe::stores
