// RS256 JWS (rs256.hpp).
#include "stores/rs256.hpp"

#include <memory>
#include <vector>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "ringsafe/error.hpp"

namespace ringsafe::stores {

std::string rs256_jws(std::string_view header, std::string_view payload, std::string_view private_key_pem,
                      const std::string& key_name) {
    const std::string input = base64url(header) + "." + base64url(payload);
    std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(private_key_pem.data(), static_cast<int>(private_key_pem.size())),
                                                  BIO_free);
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
        bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr, EVP_PKEY_free);
    ERR_clear_error();  // OpenSSL's queue would name the PEM's contents to a later reader
    if (!key) raise(errc::InvalidArgument, key_name + " is not a PEM private key");
    if (EVP_PKEY_base_id(key.get()) != EVP_PKEY_RSA) raise(errc::InvalidArgument, key_name + " is not an RSA key (RS256 needs one)");
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    std::size_t n = 0;
    if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
        EVP_DigestSign(ctx.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
        ERR_clear_error();
        raise(errc::InvalidArgument, "signing with " + key_name + " failed");
    }
    std::vector<unsigned char> sig(n);
    if (EVP_DigestSign(ctx.get(), sig.data(), &n, reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
        ERR_clear_error();
        raise(errc::InvalidArgument, "signing with " + key_name + " failed");
    }
    return input + "." + base64url(std::string_view(reinterpret_cast<const char*>(sig.data()), n));
}

}  // namespace ringsafe::stores
