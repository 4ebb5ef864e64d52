// libFuzzer target: S3 addressing and AWS SigV4 canonicalisation. The input
// is split at NUL bytes into an s3:// URL's key, a bucket, a region and an
// endpoint; for every accepted combination the signed header fields must be
// free of CR/LF (no header injection from a key), the Authorization must carry
// a 64-hex-digit signature, and the presigned URL must parse as a URL whose
// query holds that signature.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "stores/s3_object.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"

namespace rh = ringsafe::http;
namespace rs = ringsafe::stores;

namespace {

std::vector<std::string> split_nul(std::string_view s, std::size_t parts) {
    std::vector<std::string> out;
    while (out.size() + 1 < parts) {
        auto z = s.find('\0');
        if (z == std::string_view::npos) break;
        out.emplace_back(s.substr(0, z));
        s.remove_prefix(z + 1);
    }
    out.emplace_back(s);
    out.resize(parts);
    return out;
}

bool hex64(std::string_view s) {
    return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    auto f = split_nul(std::string_view(reinterpret_cast<const char*>(data), size), 4);
    ringsafe::s3_options opts;
    opts.access_key_id = "AKIDEXAMPLE";
    opts.secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    opts.region = f[2].empty() ? "us-east-1" : f[2];
    opts.endpoint = f[3];
    if (!f[3].empty() && (f[3].size() & 1)) opts.style = ringsafe::s3_options::addressing::virtual_host;
    rh::url http_url;
    try {
        const rs::object_path s3 = rs::split_s3_url("s3://" + (f[1].empty() ? std::string("bucket") : f[1]) + "/" + f[0]);
        http_url = rs::s3_http_url(s3, opts);
    } catch (const ringsafe::error& e) {
        FUZZ_CHECK(e.code() == ringsafe::errc::InvalidArgument);
        return 0;
    }
    FUZZ_CHECK(!http_url.target.empty() && http_url.target.front() == '/');
    FUZZ_CHECK(http_url.target.find_first_of("\r\n ") == std::string::npos);
    const std::time_t now = 1'700'000'000;
    auto fields = rs::sigv4_get_fields(http_url, opts, now);
    bool has_auth = false;
    for (const auto& [k, v] : fields) {
        if (k == "Authorization") {
            has_auth = true;
            auto pos = v.rfind("Signature=");
            FUZZ_CHECK(pos != std::string::npos && hex64(std::string_view(v).substr(pos + 10)));
        }
        // The region is configuration, not input from a stranger; only the URL parts must be clean.
        if (opts.region.find_first_of("\r\n") == std::string::npos) FUZZ_CHECK(v.find_first_of("\r\n") == std::string::npos);
    }
    FUZZ_CHECK(has_auth);
    // Signing is a pure function of its inputs.
    FUZZ_CHECK(rs::sigv4_get_fields(http_url, opts, now) == fields);
    std::string presigned = rs::sigv4_presign(http_url, opts, std::chrono::seconds(3600), now);
    auto sig = presigned.rfind("&X-Amz-Signature=");
    FUZZ_CHECK(sig != std::string::npos && hex64(std::string_view(presigned).substr(sig + 17)));
    if (opts.region.find_first_of("\r\n\t ") == std::string::npos) {
        try {
            rh::url p = rh::parse_url(presigned);
            FUZZ_CHECK(p.host == http_url.host && p.port == http_url.port);
        } catch (const ringsafe::error&) {
            FUZZ_CHECK(false && "a presigned URL must parse");
        }
    }
    return 0;
}
