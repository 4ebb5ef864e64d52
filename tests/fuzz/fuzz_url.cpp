// libFuzzer target: the URL parser, redirect Location resolution (a scheme
// other than http/https refused as HttpError, by name) and SigV4's UriEncode
// on arbitrary text. Whatever is accepted must be safe to put on
// the wire: a request target that starts with '/' and holds no byte outside
// printable ASCII (so no CR/LF header injection), a host without spaces or
// control bytes, and a URL that parses back to itself.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"

namespace rh = ringsafe::http;

namespace {

bool printable_ascii(std::string_view s) {
    for (unsigned char c : s)
        if (c <= 0x20 || c >= 0x7f) return false;
    return true;
}

void check_url(const rh::url& u) {
    FUZZ_CHECK(u.scheme == "http" || u.scheme == "https");
    FUZZ_CHECK(!u.host.empty() && printable_ascii(u.host));
    FUZZ_CHECK(u.port != 0);
    FUZZ_CHECK(!u.target.empty() && u.target.front() == '/');
    FUZZ_CHECK(printable_ascii(u.target));
    FUZZ_CHECK(printable_ascii(u.authority()));
    // What str() prints (messages) parses back to the same URL.
    rh::url again = rh::parse_url(u.str());
    FUZZ_CHECK(again.scheme == u.scheme && again.host == u.host && again.port == u.port && again.ipv6 == u.ipv6);
    FUZZ_CHECK(again.target == u.target);
}

void check_uri_encode(std::string_view raw, bool keep_slash) {
    std::string enc = rh::uri_encode(raw, keep_slash);
    std::size_t decoded = 0;
    for (std::size_t i = 0; i < enc.size(); ++decoded) {
        unsigned char c = enc[i];
        if (c == '%') {
            FUZZ_CHECK(i + 2 < enc.size());
            FUZZ_CHECK(std::isxdigit(static_cast<unsigned char>(enc[i + 1])) &&
                       std::isxdigit(static_cast<unsigned char>(enc[i + 2])));
            i += 3;
        } else {
            FUZZ_CHECK(std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/'));
            ++i;
        }
    }
    FUZZ_CHECK(decoded == raw.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::string_view text(reinterpret_cast<const char*>(data), size);
    check_uri_encode(text, true);
    check_uri_encode(text, false);
    try {
        check_url(rh::parse_url(text));
    } catch (const ringsafe::error& e) {
        FUZZ_CHECK(e.code() == ringsafe::errc::InvalidArgument);
    }
    static const rh::url base = rh::parse_url("https://h.example:8443/a/b/c?q=1");
    try {
        check_url(rh::resolve_location(base, text));
    } catch (const ringsafe::error& e) {
        // A malformed Location, or one of a scheme that is not followed (s3://, ftp://, file:, ...),
        // named in a message that shows the server's bytes printable (no control byte reaches a log).
        const std::string_view what = e.what();
        FUZZ_CHECK(e.code() == ringsafe::errc::InvalidArgument ||
                   (e.code() == ringsafe::errc::HttpError &&
                    what.find("only http and https Locations are followed") != std::string_view::npos &&
                    what.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos));
    }
    return 0;
}
