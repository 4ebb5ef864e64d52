// Digests and encodings for signers (digest.hpp).
#include "stores/digest.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

namespace ringsafe::stores {
namespace {

std::string encode64(std::string_view bytes, const char* digits, bool pad) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    auto at = [&](std::size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(bytes[k])); };
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const unsigned v = at(i) << 16 | at(i + 1) << 8 | at(i + 2);
        for (int s = 18; s >= 0; s -= 6) out += digits[(v >> s) & 63];
    }
    const std::size_t left = bytes.size() - i;
    if (left > 0) {
        const unsigned v = at(i) << 16 | (left == 2 ? at(i + 1) << 8 : 0u);
        out += digits[(v >> 18) & 63];
        out += digits[(v >> 12) & 63];
        if (left == 2) out += digits[(v >> 6) & 63];
        if (pad) out.append(3 - left, '=');
    }
    return out;
}

}  // namespace

std::string sha256(std::string_view data) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
    return std::string(reinterpret_cast<const char*>(md), n);
}

std::string hmac_sha256(std::string_view key, std::string_view message) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
         message.size(), md, &n);
    return std::string(reinterpret_cast<const char*>(md), n);
}

std::string hex(std::string_view bytes) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string s;
    s.reserve(2 * bytes.size());
    for (char ch : bytes) {
        const auto c = static_cast<unsigned char>(ch);
        s += digits[c >> 4];
        s += digits[c & 15];
    }
    return s;
}

std::string sha256_hex(std::string_view data) { return hex(sha256(data)); }

std::string base64(std::string_view bytes) {
    return encode64(bytes, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", true);
}

std::string base64url(std::string_view bytes) {
    return encode64(bytes, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", false);
}

bool from_base64(std::string_view in, std::string& out) {
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

}  // namespace ringsafe::stores
