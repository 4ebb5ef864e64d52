// The stores' signers against published test vectors (engine internals:
// stores/sigv4.hpp, gcs_object.hpp, shared_key.hpp, rs256.hpp): AWS's
// SigV4 test suite and S3 example, GOOG4, Azure Shared Key (azure-storage-blob
// as the reference), RFC 7515's RS256 JWS; and what the locators make of URLs
// and settings, without any network.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <optional>

#include "http/environment.hpp"
#include "http/url.hpp"
#include "ringsafe/error.hpp"
#include "stores/azure_object.hpp"
#include "stores/gcs_credentials.hpp"
#include "stores/gcs_object.hpp"
#include "stores/locate.hpp"
#include "stores/rs256.hpp"
#include "stores/shared_key.hpp"
#include "stores/sigv4.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::stores;
using ringsafe::http::parse_url;
using ringsafe::test::kind_of;

namespace {

std::string value_of(const http::header_fields& f, const std::string& name) {
    for (auto& [k, v] : f)
        if (k == name) return v;
    return "";
}

const std::string empty_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

}  // namespace

TEST_CASE("SigV4 core: the AWS Signature Version 4 test suite's get-vanilla") {
    // AWS's sig-v4 test suite (aws-sig-v4-test-suite/get-vanilla): service "service", us-east-1.
    const sigv4_key key{"AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "us-east-1", "service"};
    const sigv4_time t{"20150830", "20150830T123600Z"};
    const signed_fields f{{"host", "example.amazonaws.com"}, {"x-amz-date", "20150830T123600Z"}};
    const std::string creq = sigv4_canonical_request("GET", "/", f, empty_hash);
    CHECK(creq == "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n" + empty_hash);
    const std::string sig = sigv4_signature(aws4, key, t, creq);
    CHECK(sig == "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
    CHECK(sigv4_authorization(aws4, key, t, f, sig) ==
          "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, "
          "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
}

TEST_CASE("SigV4 core: S3's published GET Object example, Range signed") {
    // docs.aws.amazon.com, AmazonS3 API, sig-v4-header-based-auth, "Example: GET Object".
    const sigv4_key key{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "us-east-1", "s3"};
    const sigv4_time t = sigv4_at(1369353600);  // 2013-05-24T00:00:00Z
    CHECK(t.stamp == "20130524T000000Z");
    const signed_fields f{{"host", "examplebucket.s3.amazonaws.com"}, {"range", "bytes=0-9"},
                          {"x-amz-content-sha256", empty_hash}, {"x-amz-date", t.stamp}};
    CHECK(sigv4_signature(aws4, key, t, sigv4_canonical_request("GET", "/test.txt", f, empty_hash)) ==
          "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST_CASE("GOOG4-HMAC-SHA256: Google's names for the same scheme") {
    // Google publishes no GOOG4 HMAC vector; the value below was computed with
    // Python's hmac/hashlib following cloud.google.com/storage/docs/authentication/signatures
    // (key "GOOG4" + secret, scope DATE/auto/storage/goog4_request). The AWS
    // vectors above pin the shared code; this pins the names.
    const auto u = parse_url("https://storage.googleapis.com/bucket/dir/model%20v1.safetensors?generation=1795823167742371");
    const auto f = goog4_get_fields(u, "GOOG1EXAMPLE", "bGoa+V7g/yqDXvKRqq+JTFn4uQZbPiQJo4pf9RzJ", 1795780800);
    CHECK(value_of(f, "x-goog-date") == "20261127T120000Z");
    CHECK(value_of(f, "x-goog-content-sha256") == empty_hash);
    CHECK(value_of(f, "Authorization") ==
          "GOOG4-HMAC-SHA256 Credential=GOOG1EXAMPLE/20261127/auto/storage/goog4_request, "
          "SignedHeaders=host;x-goog-content-sha256;x-goog-date, "
          "Signature=7637d9bec388188dcdfad9e276147a9f89209d87b6e3a488758a7a95dc79c307");
}

TEST_CASE("Azure Shared Key: the signature azure-storage-blob computes for the same request") {
    // azure-storage-blob 12.31.1's SharedKeyCredentialPolicy signed this GET (x-ms-range,
    // If-Match, a snapshot query, the emulator's path-style URL) to
    // "SharedKey devstoreaccount1:yAlNW7NRUT2GOsNugI7yqt0Borinw7lDeznUoMGAu5c=".
    const std::string key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
    const auto u = parse_url("http://127.0.0.1:10000/devstoreaccount1/models/dir/model%20v1.safetensors"
                             "?snapshot=2026-11-27T12%3A00%3A00.0000000Z");
    const http::header_fields f{{"x-ms-date", "Fri, 27 Nov 2026 12:00:00 GMT"}, {"x-ms-version", "2025-01-05"},
                                       {"x-ms-range", "bytes=0-1023"}, {"If-Match", "\"0x8DC0000000000001\""}};
    const std::string sts = azure_string_to_sign(u, "devstoreaccount1", "", f);
    CHECK(sts == "GET\n\n\n\n\n\n\n\n\"0x8DC0000000000001\"\n\n\n\n"
                 "x-ms-date:Fri, 27 Nov 2026 12:00:00 GMT\nx-ms-range:bytes=0-1023\nx-ms-version:2025-01-05\n"
                 "/devstoreaccount1/devstoreaccount1/models/dir/model%20v1.safetensors\nsnapshot:2026-11-27T12:00:00.0000000Z");
    CHECK(azure_shared_key_authorization("devstoreaccount1", key, sts) ==
          "SharedKey devstoreaccount1:yAlNW7NRUT2GOsNugI7yqt0Borinw7lDeznUoMGAu5c=");
    CHECK(azure_date(1795780800) == "Fri, 27 Nov 2026 12:00:00 GMT");
}

TEST_CASE("RS256: RFC 7515 Appendix A.2's JWS, byte for byte") {
    // RFC 7515 A.2's RSA key (its JWK, written as PKCS#8 PEM with the `cryptography` package).
    const std::string pem =
        "-----BEGIN PRIVATE KEY-----\n"
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCh+BYK4uPJtGXO\n"
        "jS1lYmM2K5J9vinh8CR3/BYlzJChNuOL2TSXxbbqY913EeZ8dCn5VrD7io8ImtxL\n"
        "aYk8wTM/U+3QGbh3hCUv7JFP5IV3aVlL6kKA0ywPVb9ilE8TA5a8bpvfbr3SvaNn\n"
        "juygxmj3AbONv/s4yDQs4v5tJ/reSlpIdJed1LnPmt7Ex1sFhSwsD174pcF1A5L5\n"
        "ROjtZMEQxrZHYJqkeDrrnGya11UxMFBji4NmXG9veoKjlnAqH2QbgtPr8jkiGUkf\n"
        "toaHLFcW9Qr4NY2ai50Xw0Byj3+H2JoY2PyrZ62EWQwuz3WTOTY8BwNNb2BvniHg\n"
        "VFbK5emhAgMBAAECggEAEq5xpGnNCivDflJsRQBXHx1hdR1k6Ulwe2JZD50LpXyW\n"
        "PEAeP88vLNO97IjlA7/GQ5sLKMgvfTeXZx9SE+7YwVol2NXOoAJe46sui395IW/G\n"
        "O+pWJ1O0BkTGoVEn2bKVRUCgu+GjBVaYLU6f3l9kJfFNS3E0QbVdxzubSu3Mkqzj\n"
        "kn439X0M/V51gfpRLI9JYanrC4D4qAdGcopV/0ZHHzQlBjudU2QvXt4ehNYTCBr6\n"
        "XCLQUShb1juUO1ZdiYoFaFQT5Tw8bGUl/x/jTj3ccPDVZFD9pIuhLhBOneufuBiB\n"
        "4cS98l2SR/RQyGWSeWjnczT0QU91p1DhOVRuOopznQKBgQDgHMQQ60imZV1URk0K\n"
        "pLttoLhyt3SmqdEf/kgHePDdtzEafpAu+cS191R2JiuoF2yzWXnwFDcqGigp5BNr\n"
        "0AHQfD8/Lk8l1Mk09jxxCfui5nYooNyac8YFjm3vItzVCVDnEd3BbVWG8qf6deqE\n"
        "lMGAg+C2V0L4oNXnP7LZcPAZRwKBgQC5A8R+CZW2MvRTLLHzwZkUXV866cff7tx6\n"
        "kqa0finGG0KgeqlaZPxgCZnFp7AeAcCMtiynVlJ7vMVgePsLq6XtON4tB5kP9jAP\n"
        "rq3rbAOal78eUH5OcED6eNuCV8ixEu1eWcPNCS/l1OW1EnXUEoEHKl54Xrrz2uNw\n"
        "kgMTP1FZ1wKBgAcCn1dwJKufzBWQxWQp1vsM5fggqPN1qGb5y0MAk3g7/Ls5bkUp\n"
        "5u9SN0Ai3Ya6hNnvWJMb7sXQX6U/zyO2M/hTip7tUeh7CXgwo59dkpN75gJLVds2\n"
        "9+DAncu3KXU4f2Fa+7bLNrur53k8KwPOq2bbuTG69QtV7Jr5MR0AHWKNAoGBAIf/\n"
        "evpitUf+4JYbLpvNXWcY052Mpz22aR84mY3nh3F2LF2mjMJDpTg7FmuyPcVw6EcG\n"
        "yoAe9fa65iNqCq+jdw6PVNGo2hxfjSiZ8IIzHdsPXI89//pMjZcQK9r+CCoRjaZj\n"
        "OYiIDktVWZzmevJuv6WywUqd57LE3Zar3dLSIkx1AoGAIYd7DHOhrWvxkwPQsRM2\n"
        "tOgrjbcrfvtQJipd+DlcxyVuuM9sQLdgjVk2oy26F0EmpScGLq2MowX7fhd/QJQ3\n"
        "ydy5cY7YIBi87w93IKLEdfnbJtoOPLUW0ITrJReOgo1cq9SbsxYawBgfp/gh6A56\n"
        "03k2+ZQwVK0JKSHuLFkuQ3U=\n"
        "-----END PRIVATE KEY-----\n";
    const std::string jws = rs256_jws("{\"alg\":\"RS256\"}", "{\"iss\":\"joe\",\r\n \"exp\":1300819380,\r\n \"http://example.com/is_root\":true}",
                                      pem, "the RFC key");
    CHECK(jws ==
          "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ."
          "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZ"
          "cAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-e"
          "OkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw");
    CHECK(base64url("") == "");
    CHECK(base64url("f") == "Zg");
    CHECK(base64url("fo") == "Zm8");
    CHECK(base64url("\xfb\xff") == "-_8");
    const std::string bad = kind_of([] { rs256_jws("{}", "{}", "-----BEGIN PRIVATE KEY-----\nnot a key\n", "the key of x.json"); });
    CHECK_THAT(bad, Catch::Contains("InvalidArgument") && Catch::Contains("the key of x.json") && !Catch::Contains("not a key"));
}

TEST_CASE("the service account's JWT claims") {
    CHECK(gcs_jwt_claims("sa@p.iam.gserviceaccount.com", "https://oauth2.googleapis.com/token", 1000) ==
          "{\"iss\":\"sa@p.iam.gserviceaccount.com\",\"scope\":\"https://www.googleapis.com/auth/devstorage.read_only\","
          "\"aud\":\"https://oauth2.googleapis.com/token\",\"iat\":1000,\"exp\":4600}");
}

TEST_CASE("gs:// URLs: the XML API path, endpoints, errors") {
    store_options o;
    o.gcs.anonymous = true;
    o.gcs.endpoint = "http://127.0.0.1:9/base/";
    auto obj = locate_gcs("gs://my-bucket/dir/a b+c.safetensors", {}, o);
    CHECK(obj.requested.str() == "http://127.0.0.1:9/base/my-bucket/dir/a%20b%2Bc.safetensors");
    REQUIRE(obj.pin);
    CHECK(obj.pin->field == "x-goog-generation");
    CHECK(obj.pin->query == "generation");
    CHECK_FALSE(obj.sign);
    CHECK_FALSE(obj.credentials);
    o.gcs.endpoint.clear();
    CHECK(locate_gcs("GS://b/o", {}, o).requested.str() == "https://storage.googleapis.com/b/o");
    CHECK_THAT(kind_of([&] { locate_gcs("gs://b", {}, o); }), Catch::Contains("InvalidArgument") && Catch::Contains("gs://b"));
    CHECK_THAT(kind_of([&] { locate_gcs("gs:///o", {}, o); }), Catch::Contains("missing the bucket"));
    CHECK_THAT(kind_of([&] { locate_gcs("gs://b a/o", {}, o); }), Catch::Contains("invalid character"));
    o.gcs.anonymous = false;
    o.gcs.credentials_file = "/nonexistent/key.json";
    CHECK_THAT(kind_of([&] { locate_gcs("gs://b/o", {}, o); }), Catch::Contains("InvalidArgument") && Catch::Contains("/nonexistent/key.json"));
    CHECK(is_url("gs://b/o"));
    CHECK(is_url("az://c/b"));
}

TEST_CASE("az:// and blob.core.windows.net URLs: endpoints, connection strings, credentials per account") {
    const std::string key = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";
    store_options o;
    o.azure.connection_string = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + key +
                                ";BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;";
    auto obj = locate_azure("az://models/dir/m v1.safetensors", {}, o);
    CHECK(obj.requested.str() == "http://127.0.0.1:10000/devstoreaccount1/models/dir/m%20v1.safetensors");
    const auto f = obj.sign(obj.requested, "bytes=0-9", {});
    CHECK(value_of(f, "x-ms-version") == "2025-01-05");
    CHECK(value_of(f, "Authorization").starts_with("SharedKey devstoreaccount1:"));
    CHECK_FALSE(value_of(f, "x-ms-date").empty());

    store_options p;  // account + SAS, EndpointSuffix of another cloud
    p.azure.connection_string = "AccountName=acct;SharedAccessSignature=sv=2025-01-05&ss=b&sig=a%2Bb%3D;EndpointSuffix=core.chinacloudapi.cn";
    obj = locate_azure("az://c/b", {}, p);
    CHECK(obj.requested.str() == "https://acct.blob.core.chinacloudapi.cn/c/b?sv=2025-01-05&ss=b&sig=a%2Bb%3D");
    CHECK(value_of(obj.sign(obj.requested, "", {}), "Authorization").empty());

    store_options none;
    none.azure.anonymous = true;
    CHECK_THAT(kind_of([&] { locate_azure("az://c/b", {}, {}); }),
               Catch::Contains("InvalidArgument") && Catch::Contains("AZURE_STORAGE_ACCOUNT"));
    store_options badkey;
    badkey.azure.account = "acct";
    badkey.azure.key = "not*base64secret";
    const std::string k = kind_of([&] { locate_azure("az://c/b", {}, badkey); });
    CHECK_THAT(k, Catch::Contains("not base64") && !Catch::Contains("not*base64secret"));

    // An https URL of a blob host: its own SAS query as it is; a key only for its own account.
    store_options q;
    q.azure.account = "other";
    q.azure.key = key;
    obj = locate_http("https://acct.blob.core.windows.net/c/b.safetensors?sv=2025-01-05&sig=x%2By", {}, q);
    CHECK(obj.requested.str() == "https://acct.blob.core.windows.net/c/b.safetensors?sv=2025-01-05&sig=x%2By");
    CHECK(value_of(obj.sign(obj.requested, "", {}), "Authorization").empty());
    obj = locate_http("https://acct.blob.core.windows.net/c/b.safetensors", {}, q);
    CHECK(value_of(obj.sign(obj.requested, "", {}), "Authorization").empty());  // another account's key stays home
    q.azure.account = "acct";
    obj = locate_http("https://acct.blob.core.windows.net/c/b.safetensors", {}, q);
    CHECK(value_of(obj.sign(obj.requested, "", {}), "Authorization").starts_with("SharedKey acct:"));
    CHECK_FALSE(locate_http("https://example.com/blob.core.windows.net/x", {}, q).sign);
}

TEST_CASE("fill_from_env: an empty field takes the first variable set and not empty, a set field keeps its value") {
    using http::fill_from_env;
    test::scoped_env a("RINGSAFE_TEST_FILL_A", std::nullopt), b("RINGSAFE_TEST_FILL_B", ""),
        c("RINGSAFE_TEST_FILL_C", "from-c"), d("RINGSAFE_TEST_FILL_D", "from-d");
    std::string f;
    CHECK(std::string(fill_from_env(f, {"RINGSAFE_TEST_FILL_A", "RINGSAFE_TEST_FILL_B", "RINGSAFE_TEST_FILL_C",
                                        "RINGSAFE_TEST_FILL_D"})) == "RINGSAFE_TEST_FILL_C");
    CHECK(f == "from-c");
    CHECK(fill_from_env(f, {"RINGSAFE_TEST_FILL_D"}) == nullptr);  // already set: kept
    CHECK(f == "from-c");
    std::string none;
    CHECK(fill_from_env(none, {"RINGSAFE_TEST_FILL_A", "RINGSAFE_TEST_FILL_B"}) == nullptr);
    CHECK(none.empty());
}
