#include "stores/sigv4.hpp"

#include <algorithm>

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace ringsafe::stores {
namespace {

std::string hex(const unsigned char* p, std::size_t n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    s.reserve(2 * n);
    for (std::size_t i = 0; i < n; ++i) s += digits[p[i] >> 4], s += digits[p[i] & 15];
    return s;
}

std::string hmac(std::string_view key, std::string_view msg) {
    unsigned char md[32];
    unsigned int n = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(msg.data()),
         msg.size(), md, &n);
    return std::string(reinterpret_cast<char*>(md), n);
}

}  // namespace

sigv4_time sigv4_at(std::time_t now) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    char d[16], a[32];
    std::strftime(d, sizeof d, "%Y%m%d", &tm);
    std::strftime(a, sizeof a, "%Y%m%dT%H%M%SZ", &tm);
    return {d, a};
}

std::string sha256_hex(std::string_view data) {
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
    return hex(md, n);
}

std::string sigv4_canonical_query(std::string_view query) {
    std::vector<std::string> params;
    while (!query.empty()) {
        auto amp = query.find('&');
        std::string p(query.substr(0, amp));
        if (p.find('=') == std::string::npos) p += '=';
        if (p != "=") params.push_back(p);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    }
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
    const auto q = target.find('?');
    std::string c(method);
    c.append("\n").append(target.substr(0, q)).append("\n");
    c += sigv4_canonical_query(q == std::string_view::npos ? std::string_view{} : target.substr(q + 1));
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
    std::string k = hmac(std::string(alg.key_prefix).append(key.secret), t.date);
    k = hmac(k, key.region);
    k = hmac(k, key.service);
    k = hmac(k, alg.terminator);
    const std::string sig = hmac(k, to_sign);
    return hex(reinterpret_cast<const unsigned char*>(sig.data()), sig.size());
}

std::string sigv4_authorization(const sigv4_algorithm& alg, const sigv4_key& key, const sigv4_time& t,
                                const signed_fields& fields, const std::string& signature) {
    std::string a(alg.name);
    a.append(" Credential=").append(key.access_key_id).append("/").append(sigv4_scope(alg, key, t));
    a.append(", SignedHeaders=").append(sigv4_signed_headers(fields)).append(", Signature=").append(signature);
    return a;
}

}  // namespace ringsafe::stores
