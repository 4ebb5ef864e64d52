// URL parsing, redirect resolution, s3:// URLs, S3 addressing and SigV4 (engine/http/url.hpp,
// engine/stores/object_path.hpp, engine/stores/s3_object.hpp).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "http/connection.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/open_source.hpp"
#include "stores/object_path.hpp"
#include "stores/s3_object.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::http;
using namespace ringsafe::stores;

TEST_CASE("parse_url splits scheme, host, port and target") {
    auto u = parse_url("HTTP://Example.COM/a/b.safetensors?x=1#frag");
    CHECK(u.scheme == "http");
    CHECK(u.host == "example.com");
    CHECK(u.port == 80);
    CHECK(u.target == "/a/b.safetensors?x=1");
    CHECK(u.authority() == "example.com");
    CHECK(parse_url("https://h:8443").target == "/");
    CHECK(parse_url("https://h:8443").authority() == "h:8443");
    CHECK(parse_url("https://h:443/x").origin() == "https://h");
    auto v4 = parse_url("http://127.0.0.1:8080/f");
    CHECK(v4.host == "127.0.0.1");
    CHECK(v4.port == 8080);
    auto v6 = parse_url("http://[::1]:9000/f");
    CHECK(v6.ipv6);
    CHECK(v6.host == "::1");
    CHECK(v6.port == 9000);
    CHECK(v6.authority() == "[::1]:9000");
    CHECK(parse_url("http://[2001:db8::7]/f").authority() == "[2001:db8::7]");
}

TEST_CASE("parse_url percent-encodes what a request target may not contain") {
    CHECK(parse_url("http://h/my model/ü.bin").target == "/my%20model/%C3%BC.bin");
    CHECK(parse_url("http://h/a%20b").target == "/a%20b");   // existing escapes stay
    CHECK(parse_url("http://h/100%").target == "/100%25");    // a lone % is escaped
    CHECK(parse_url("http://h?q=1").target == "/?q=1");
}

TEST_CASE("parse_url rejects invalid URLs with InvalidArgument naming them") {
    for (const char* bad : {"ftp://h/x", "http//h/x", "http:///x", "http://h:0/x", "http://h:65536/x", "http://h:12a/x",
                            "http://[::1/x", "http://user:pw@h/x", "http://h h/x", "s3://bucket", "s3://bucket/"}) {
        INFO(bad);
        try {
            parse_url(bad);
            FAIL("accepted");
        } catch (const error& e) {
            CHECK(e.code() == errc::InvalidArgument);
            CHECK(std::string(e.what()).find(bad) != std::string::npos);
        }
    }
}

TEST_CASE("a URL parse_url refuses is named without its signing query values") {
    // A user's mistyped SAS URL, or a redirect's Location a server sent (a
    // presigned URL is a credential): named as given but for those values.
    for (const char* bad : {"https://acct.blob.core.windows.net:99999/c/b?sv=1&sig=SASSECRET",
                            "https://cdn.exa mple/x?Expires=1&Signature=SIGSECRET&Key-Pair-Id=KPSECRET",
                            "ftp://h/x?X-Amz-Signature=AMZSECRET"}) {
        const std::string m = test::kind_of([&] { parse_url(bad); });
        INFO(m);
        CHECK_THAT(m, Catch::StartsWith("InvalidArgument: invalid URL '"));
        CHECK(m.find("SECRET") == std::string::npos);
    }
    CHECK_THAT(test::kind_of([] { resolve_location(parse_url("https://hub.example/r"), "https://cdn:0/f?sig=LOCSECRET"); }),
               Catch::Contains("https://cdn:0/f?sig=...") && !Catch::Contains("LOCSECRET"));
}

TEST_CASE("s3 URLs keep the raw key; parse_url takes http and https only") {
    auto u = split_s3_url("s3://my-bucket/dir/model file.safetensors");
    CHECK(u.bucket == "my-bucket");
    CHECK(u.object == "dir/model file.safetensors");
    u = split_s3_url("S3://My-Bucket:9000/k?v=1#frag");  // the bucket as a host: lower case, port dropped
    CHECK(u.bucket == "my-bucket");
    CHECK(u.object == "k?v=1");
    CHECK(split_s3_url("s3://[::1]/k").bucket == "::1");
    // (a named pair, not a structured binding: clang 14 cannot capture one in the lambda)
    for (const auto& c : std::vector<std::pair<std::string, std::string>>{
             {"s3://bucket", "s3 URLs need a key: s3://bucket/key"},
             {"s3://bucket/", "s3 URLs need a key: s3://bucket/key"},
             {"s3:///k", "missing host"},
             {"s3://b b/k", "invalid character in host name"},
             {"s3://b:0/k", "port out of range"},
             {"s3://u@b/k", "credentials in the URL are not supported"},
             {"s3:/b/k", "expected scheme://host/path"},
             {"gs://b/k", "expected s3://BUCKET/KEY"}}) {
        const std::string& bad = c.first;
        const std::string& why = c.second;
        INFO(bad);
        CHECK_THAT(test::kind_of([&] { split_s3_url(bad); }),
                   Catch::StartsWith("InvalidArgument: invalid URL '" + bad + "': " + why));
    }
    CHECK_THAT(test::kind_of([] { parse_url("s3://bucket/key"); }),
               Catch::Contains("unsupported scheme 's3' (expected http or https)"));
}

TEST_CASE("split_target cuts at the first '?'; query_parameters splits at '&' then the first '=', empty ones left out") {
    CHECK(split_target("/a/b?x=1?y").path == "/a/b");
    CHECK(split_target("/a/b?x=1?y").query == "x=1?y");
    CHECK(split_target("/a/b").path == "/a/b");
    CHECK(split_target("/a/b").query.empty());
    CHECK(split_target("/a?").query.empty());
    const auto p = query_parameters("a=1&&b&c==2&=&");
    REQUIRE(p.size() == 4);
    CHECK((p[0].name == "a" && p[0].value == "1" && p[0].has_value));
    CHECK((p[1].name == "b" && p[1].value.empty() && !p[1].has_value));
    CHECK((p[2].name == "c" && p[2].value == "=2" && p[2].has_value));
    CHECK((p[3].name.empty() && p[3].value.empty() && p[3].has_value));
    CHECK(query_parameters("").empty());
    CHECK(query_parameters("&&").empty());
}

TEST_CASE("append_query starts the query with '?' and adds to one with '&'") {
    url u = parse_url("http://h/a/b");
    append_query(u, "generation=7");
    CHECK(u.target == "/a/b?generation=7");
    append_query(u, "sv=1&sig=x");
    CHECK(u.target == "/a/b?generation=7&sv=1&sig=x");
    url q = parse_url("http://h/o?versionId=3");
    append_query(q, "x=1");
    CHECK(q.str() == "http://h/o?versionId=3&x=1");
}

TEST_CASE("resolve_location handles absolute, scheme-relative and relative references") {
    auto base = parse_url("https://hub.test/org/repo/resolve/main/model.safetensors?x=1");
    CHECK(resolve_location(base, "https://cdn.test:8443/obj").str() == "https://cdn.test:8443/obj");
    CHECK(resolve_location(base, "//cdn.test/obj").str() == "https://cdn.test/obj");
    CHECK(resolve_location(base, "/api/x?y=2").str() == "https://hub.test/api/x?y=2");
    CHECK(resolve_location(base, "other.bin").str() == "https://hub.test/org/repo/resolve/main/other.bin");
    CHECK(resolve_location(base, "../../raw/main/a b").str() == "https://hub.test/org/repo/raw/main/a%20b");
    CHECK(resolve_location(base, "./").str() == "https://hub.test/org/repo/resolve/main/");
    CHECK(resolve_location(base, "?z=3").str() == "https://hub.test/org/repo/resolve/main/model.safetensors?z=3");
}

TEST_CASE("resolve_location follows http and https only: any other scheme is an HttpError naming both URLs") {
    const auto base = parse_url("https://hub.test/org/repo/resolve/main/model.safetensors");
    CHECK(resolve_location(base, "HTTPS://cdn.test/x").str() == "https://cdn.test/x");
    CHECK(resolve_location(base, "http://cdn.test/x").str() == "http://cdn.test/x");  // a downgrade: range_fetch decides
    CHECK(location_scheme("s3://b/k") == "s3");
    CHECK(location_scheme("file:/etc/passwd") == "file");
    CHECK(location_scheme("a/b:c").empty());   // a ':' after the first '/' is in the path
    CHECK(location_scheme("1ab:c").empty());   // a scheme starts with a letter
    CHECK(location_scheme("?q=a:b").empty());
    CHECK(resolve_location(base, "a/b:c").str() == "https://hub.test/org/repo/resolve/main/a/b:c");
    for (const char* loc : {"s3://127.0.0.1:18081/model.safetensors", "s3://127.0.0.1/model.safetensors",
                            "S3://h/k", "ftp://h/x", "gs://b/o", "az://c/b", "hf://org/name", "file:///etc/passwd",
                            "file:/etc/passwd", "javascript:alert(1)", "s3://h/k?X-Amz-Signature=LOCSECRET"}) {
        INFO(loc);
        const std::string m = test::kind_of([&] { resolve_location(base, loc); });
        CHECK_THAT(m, Catch::StartsWith("HttpError: refused a redirect from " + base.str()) &&
                          Catch::Contains("only http and https Locations are followed") && !Catch::Contains("LOCSECRET"));
        CHECK_THAT(m, Catch::Contains(std::string(loc).substr(0, std::string(loc).find('?'))));
    }
}

TEST_CASE("a request goes out only for http and https, its target starting with '/'") {
    check_request_target(parse_url("http://h/x"));
    check_request_target(parse_url("https://h"));  // "/"
    // A url of another scheme (parse_url makes none, but a url is a plain struct) never reaches a connection.
    for (const char* scheme : {"s3", "ftp"}) {
        url other = parse_url("http://127.0.0.1:18081/model.safetensors");
        other.scheme = scheme;
        CHECK_THAT(test::kind_of([&] { check_request_target(other); }),
                   Catch::StartsWith("InvalidArgument: refused to connect") && Catch::Contains(std::string("not ") + scheme));
    }
    url no_slash = parse_url("http://h/x");
    no_slash.target = "model.safetensors";
    CHECK_THAT(test::kind_of([&] { check_request_target(no_slash); }), Catch::Contains("does not start with '/'"));
}

TEST_CASE("S3 addressing: virtual host on AWS, path style on custom endpoints") {
    s3_options o;
    o.region = "eu-west-1";
    auto s3 = split_s3_url("s3://bucket-1/a/b c.bin");
    CHECK(s3_http_url(s3, o).str() == "https://bucket-1.s3.eu-west-1.amazonaws.com/a/b%20c.bin");
    o.endpoint = "http://127.0.0.1:7480";
    CHECK(s3_http_url(s3, o).str() == "http://127.0.0.1:7480/bucket-1/a/b%20c.bin");
    o.endpoint = "http://minio.test:9000/prefix/";
    o.style = s3_options::addressing::virtual_host;
    CHECK(s3_http_url(s3, o).str() == "http://bucket-1.minio.test:9000/prefix/a/b%20c.bin");
    o.endpoint = "S3://other/bucket";
    CHECK_THAT(test::kind_of([&] { s3_http_url(s3, o); }),
               Catch::StartsWith("InvalidArgument: S3 endpoint must be http(s): S3://other/bucket"));
    o.endpoint = "s3://other";
    CHECK_THAT(test::kind_of([&] { s3_http_url(s3, o); }), Catch::Contains("s3 URLs need a key"));
    CHECK(uri_encode("a b/c~d+e", true) == "a%20b/c~d%2Be");
    CHECK(uri_encode("a/b", false) == "a%2Fb");
}

TEST_CASE("SigV4 presigned URL matches AWS's published example") {
    // docs.aws.amazon.com AmazonS3 sigv4-query-string-auth example.
    s3_options o;
    o.access_key_id = "AKIAIOSFODNN7EXAMPLE";
    o.secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    o.region = "us-east-1";
    const std::time_t t = 1369353600;  // 2013-05-24T00:00:00Z
    auto u = parse_url("https://examplebucket.s3.amazonaws.com/test.txt");
    std::string signed_url = sigv4_presign(u, o, std::chrono::seconds(86400), t);
    CHECK(signed_url.find("X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404") != std::string::npos);
    CHECK(signed_url.starts_with("https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&"));
}

TEST_CASE("presign_s3_url refuses what it cannot sign, naming the URL") {
    s3_options o;
    o.access_key_id = "AKID";
    o.secret_access_key = "secret";
    o.region = "us-east-1";
    o.endpoint = "http://127.0.0.1:7480";
    using std::chrono::seconds;
    CHECK_THAT(test::kind_of([&] { presign_s3_url("http://127.0.0.1/b/k", o, seconds(60)); }),
               Catch::StartsWith("InvalidArgument") && Catch::Contains("not an s3:// URL: http://127.0.0.1/b/k"));
    CHECK_THAT(test::kind_of([&] { presign_s3_url("s3://b/k", o, seconds(0)); }),
               Catch::StartsWith("InvalidArgument") && Catch::Contains("out of range 1..604800 for s3://b/k"));
    CHECK_THAT(test::kind_of([&] { presign_s3_url("s3://b/k", o, seconds(604801)); }),
               Catch::Contains("out of range"));
    // Signed with the given key for the endpoint's path-style URL.
    const std::string u = presign_s3_url("s3://b/k", o, seconds(60));
    CHECK(u.starts_with("http://127.0.0.1:7480/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&"));
    CHECK(u.find("X-Amz-Credential=AKID%2F") != std::string::npos);
    CHECK(u.find("X-Amz-Expires=60") != std::string::npos);
}

TEST_CASE("SigV4 header fields sign host, date and payload hash") {
    s3_options o;
    o.access_key_id = "AKID";
    o.secret_access_key = "secret";
    o.region = "us-east-1";
    o.session_token = "tok";
    auto f = sigv4_get_fields(parse_url("http://127.0.0.1:7480/b/k"), o, 1369353600);
    std::string auth;
    bool token = false;
    for (auto& [k, v] : f) {
        if (k == "Authorization") auth = v;
        if (k == "x-amz-security-token") token = v == "tok";
    }
    CHECK(token);
    CHECK(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, "
                           "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature="));
    // Deterministic: the same inputs sign the same, a different secret differently.
    CHECK(sigv4_get_fields(parse_url("http://127.0.0.1:7480/b/k"), o, 1369353600) == f);
    o.secret_access_key = "other";
    CHECK(sigv4_get_fields(parse_url("http://127.0.0.1:7480/b/k"), o, 1369353600) != f);
}

TEST_CASE("HF_TOKEN is applied only to Hub hosts and never over an explicit token") {
    ::setenv("HF_TOKEN", "hf_abc", 1);
    http_options o;
    apply_environment_credentials("https://huggingface.co/org/m/resolve/main/model.safetensors", o);
    CHECK(o.bearer_token == "hf_abc");
    http_options sub;
    apply_environment_credentials("https://cdn-lfs.hf.co/x", sub);
    CHECK(sub.bearer_token == "hf_abc");
    http_options other;
    apply_environment_credentials("https://evilhuggingface.co/x", other);
    CHECK(other.bearer_token.empty());
    http_options mine;
    mine.bearer_token = "explicit";
    apply_environment_credentials("https://huggingface.co/x", mine);
    CHECK(mine.bearer_token == "explicit");
    ::unsetenv("HF_TOKEN");
    http_options none;
    apply_environment_credentials("https://huggingface.co/x", none);
    CHECK(none.bearer_token.empty());
}

namespace {

// The InvalidArgument message of fn(), "" when it does not throw one.
template <class Fn>
std::string invalid_argument(Fn fn) {
    try {
        fn();
    } catch (const error& e) {
        CHECK(e.code() == errc::InvalidArgument);
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("connections and chunk size: 0 takes RINGSAFE_CONNECTIONS / RINGSAFE_CHUNK, else the defaults") {
    ::unsetenv("RINGSAFE_CONNECTIONS");
    ::unsetenv("RINGSAFE_CHUNK");
    http_options o;
    CHECK(o.connections_per_origin == 0);
    CHECK(o.chunk_size == 0);
    http_options r = resolved_http_options(o);
    CHECK(r.connections_per_origin == default_connections_per_origin);
    CHECK(r.chunk_size == default_http_chunk_size);

    ::setenv("RINGSAFE_CONNECTIONS", "64", 1);
    ::setenv("RINGSAFE_CHUNK", "48M", 1);
    r = resolved_http_options(o);
    CHECK(r.connections_per_origin == 64);
    CHECK(r.chunk_size == 48u << 20);
    http_options mine;  // the caller's values win over the environment
    mine.connections_per_origin = 3;
    mine.chunk_size = 1u << 20;
    r = resolved_http_options(mine);
    CHECK(r.connections_per_origin == 3);
    CHECK(r.chunk_size == 1u << 20);
    ::setenv("RINGSAFE_CHUNK", "65536", 1);
    CHECK(resolved_http_options(o).chunk_size == 65536);
    ::setenv("RINGSAFE_CONNECTIONS", "256", 1);
    CHECK(resolved_http_options(o).connections_per_origin == max_connections_per_origin);

    // Bad environment values name the variable and the value.
    for (const char* bad : {"abc", "8M", "-1", "0", "257", "99999999999999999999"}) {
        INFO(bad);
        ::setenv("RINGSAFE_CONNECTIONS", bad, 1);
        CHECK(invalid_argument([&] { resolved_http_options(o); }).find("RINGSAFE_CONNECTIONS") != std::string::npos);
    }
    ::unsetenv("RINGSAFE_CONNECTIONS");
    for (const char* bad : {"lots", "0", "1K", "2G", "8X", "-4M"}) {
        INFO(bad);
        ::setenv("RINGSAFE_CHUNK", bad, 1);
        const std::string msg = invalid_argument([&] { resolved_http_options(o); });
        CHECK(msg.find("RINGSAFE_CHUNK") != std::string::npos);
        CHECK(msg.find(std::string("'") + bad + "'") != std::string::npos);
    }
    ::unsetenv("RINGSAFE_CHUNK");
}

TEST_CASE("connections_per_origin 1..256 and chunk_size 4 KiB..1 GiB; open_url names the option, value and URL") {
    ::unsetenv("RINGSAFE_CONNECTIONS");
    ::unsetenv("RINGSAFE_CHUNK");
    http_options o;
    o.connections_per_origin = 64;
    CHECK(resolved_http_options(o).connections_per_origin == 64);
    o.connections_per_origin = 257;
    CHECK(invalid_argument([&] { resolved_http_options(o); }).find("connections_per_origin 257 is out of range 1..256") !=
          std::string::npos);
    // Refused before any connection is tried (nothing listens on port 1).
    const std::string msg = invalid_argument([&] { open_url("http://127.0.0.1:1/m.safetensors", o); });
    CHECK(msg.find("connections_per_origin 257") != std::string::npos);
    CHECK(msg.find("http://127.0.0.1:1/m.safetensors") != std::string::npos);
    o.connections_per_origin = 2;
    for (std::uint64_t bad : {std::uint64_t{1}, std::uint64_t{4095}, (std::uint64_t{1} << 30) + 1}) {
        o.chunk_size = bad;
        CHECK(invalid_argument([&] { resolved_http_options(o); }).find("chunk_size " + std::to_string(bad)) !=
              std::string::npos);
    }
    o.chunk_size = 4096;
    CHECK(resolved_http_options(o).chunk_size == 4096);
    o.chunk_size = 1u << 30;
    CHECK(resolved_http_options(o).chunk_size == 1u << 30);
}

TEST_CASE("CR, LF or NUL in a header, token or S3 credential is refused before anything is sent, secret unnamed") {
    const std::string url = "http://127.0.0.1:1/m.safetensors";  // nothing listens: a request would fail otherwise
    auto refused = [&](const http_options& o, const std::string& u, const store_options& st = {}) {
        return invalid_argument([&] { open_url(u, o, st); });
    };
    for (std::string bad : std::vector<std::string>{"secret\r\nX-Injected: 1", "secret\nX: 1", "secret\rX", std::string("sec\0ret", 7)}) {
        INFO(bad.size());
        http_options h;
        h.headers = {{"X-Api-Key", bad}};
        std::string msg = refused(h, url);
        CHECK(msg.find("header 'X-Api-Key'") != std::string::npos);
        CHECK(msg.find(url) != std::string::npos);
        CHECK(msg.find("secret") == std::string::npos);  // never the value

        http_options t;
        t.bearer_token = bad;
        msg = refused(t, url);
        CHECK(msg.find("bearer token") != std::string::npos);
        CHECK(msg.find("secret") == std::string::npos);

        store_options s;
        s.s3.endpoint = "http://127.0.0.1:1";
        s.s3.access_key_id = "AKIDEXAMPLE";
        s.s3.secret_access_key = "wJalr";
        s.s3.session_token = bad;
        msg = refused({}, "s3://bucket/key", s);
        CHECK(msg.find("S3 session token") != std::string::npos);
        CHECK(msg.find("secret") == std::string::npos);
        s.s3.session_token.clear();
        s.s3.access_key_id = bad;
        CHECK(refused({}, "s3://bucket/key", s).find("S3 access key id") != std::string::npos);
    }
    for (std::string name : std::vector<std::string>{"X-Bad\r\nX-Injected", "X Bad", "X:Bad", "", std::string("X\0", 2)}) {
        http_options h;
        h.headers = {{name, "v"}};
        CHECK(refused(h, url).find("is not a valid HTTP field name") != std::string::npos);
    }
    // From the environment too: AWS_SESSION_TOKEN with a line break.
    ::setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", "wJalr", 1);
    ::setenv("AWS_SESSION_TOKEN", "secret\r\nX-Injected: 1", 1);
    store_options e;
    e.s3.endpoint = "http://127.0.0.1:1";
    const std::string msg = refused({}, "s3://bucket/key", e);
    CHECK(msg.find("S3 session token") != std::string::npos);
    CHECK(msg.find("secret") == std::string::npos);
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
    ::unsetenv("AWS_SESSION_TOKEN");
}

TEST_CASE("a refused redirect shows the server's Location printable: no control byte reaches a message") {
    const http::url base = http::parse_url("https://h.example/a");
    const std::string loc = std::string("s3://b/k\r\nSet-Cookie: x") + std::string(1, '\0') + "tail";
    try {
        http::resolve_location(base, loc);
        FAIL("an s3:// Location was followed");
    } catch (const error& e) {
        CHECK(e.code() == errc::HttpError);
        const std::string what = e.what();
        CHECK_THAT(what, Catch::Contains("'s3://b/k\\x0d\\x0aSet-Cookie: x\\x00tail'") &&
                             Catch::Contains("only http and https Locations are followed"));
        CHECK(what.find_first_of(std::string("\r\n\0", 3)) == std::string::npos);
    }
}
