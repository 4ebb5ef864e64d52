// URL parsing, redirect resolution, S3 addressing and SigV4 (engine/http/url.hpp, s3_object.hpp).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "http/s3_object.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"

using namespace ringsafe;
using namespace ringsafe::http_engine;

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

TEST_CASE("s3 URLs keep the raw key") {
    auto u = parse_url("s3://my-bucket/dir/model file.safetensors");
    CHECK(u.scheme == "s3");
    CHECK(u.host == "my-bucket");
    CHECK(u.target == "dir/model file.safetensors");
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

TEST_CASE("S3 addressing: virtual host on AWS, path style on custom endpoints") {
    s3_options o;
    o.region = "eu-west-1";
    auto s3 = parse_url("s3://bucket-1/a/b c.bin");
    CHECK(s3_http_url(s3, o).str() == "https://bucket-1.s3.eu-west-1.amazonaws.com/a/b%20c.bin");
    o.endpoint = "http://127.0.0.1:7480";
    CHECK(s3_http_url(s3, o).str() == "http://127.0.0.1:7480/bucket-1/a/b%20c.bin");
    o.endpoint = "http://minio.test:9000/prefix/";
    o.style = s3_options::addressing::virtual_host;
    CHECK(s3_http_url(s3, o).str() == "http://bucket-1.minio.test:9000/prefix/a/b%20c.bin");
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
