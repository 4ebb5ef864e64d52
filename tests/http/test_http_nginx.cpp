// open_url against a real nginx on 127.0.0.1: ranges, keep-alive, HTTPS,
// redirects across origins, bearer tokens, servers that ignore ranges, 503s.
#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "http_harness.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

std::vector<std::byte> make_data(std::size_t n, std::uint64_t seed) {
    std::vector<std::byte> v(n);
    fill_pattern(v, seed);
    return v;
}

// nginx with a data directory holding "data/file.bin" (and whatever the test adds).
struct site {
    temp_dir tmp;
    fs::path root = tmp / "www";
    std::vector<std::byte> data = make_data((3u << 20) + 12345, 7);
    site() {
        fs::create_directories(root / "data");
        write_file(root / "data" / "file.bin", data);
    }
};

http_options small_chunks() {
    http_options o;
    o.prefetch = 64 << 10;
    o.chunk_size = 256 << 10;
    o.connections_per_origin = 3;
    o.retry_base_delay = std::chrono::milliseconds(1);
    return o;
}

}  // namespace

TEST_CASE("ranges land exactly in the caller's buffers, spread over keep-alive connections") {
    site s;
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    auto src = open_url(ng.base_url() + "/data/file.bin", small_chunks());
    REQUIRE(src->size() == s.data.size());
    REQUIRE(src->prefix().size() == 64u << 10);
    CHECK(std::equal(src->prefix().begin(), src->prefix().end(), s.data.begin()));
    CHECK(ng.access_log(1).size() == 1);  // open = one request

    // Several ops, unaligned, one crossing many chunks, surrounded by guard bytes.
    struct span_ask { std::uint64_t off, len; };
    std::vector<span_ask> asks{{0, 1}, {17, 1000}, {100'000, 2'000'000}, {s.data.size() - 5, 5}, {3u << 20, 12345}};
    const std::size_t guard = 64;
    std::vector<std::vector<std::byte>> bufs;
    std::vector<read_op> ops;
    for (std::uint32_t i = 0; i < asks.size(); ++i) {
        bufs.emplace_back(asks[i].len + 2 * guard, std::byte{0xEE});
        ops.push_back({asks[i].off, asks[i].len, bufs.back().data() + guard, i});
    }
    std::vector<std::uint64_t> landed(ops.size());
    io_control ctl;
    ctl.on_bytes = [&](std::size_t i, std::uint64_t n) { landed[i] += n; };
    src->execute(ops, ctl);
    for (std::size_t i = 0; i < ops.size(); ++i) {
        INFO("op " << i);
        CHECK(landed[i] == asks[i].len);
        CHECK(std::equal(bufs[i].begin() + guard, bufs[i].end() - guard, s.data.begin() + asks[i].off));
        CHECK(std::all_of(bufs[i].begin(), bufs[i].begin() + guard, [](std::byte b) { return b == std::byte{0xEE}; }));
        CHECK(std::all_of(bufs[i].end() - guard, bufs[i].end(), [](std::byte b) { return b == std::byte{0xEE}; }));
    }
    // 1 + 1 + 8 + 1 + 1 chunk requests of <= 256 KiB on at most 3 connections, the open's reused.
    auto log = ng.access_log(1 + 1 + 1 + 8 + 1 + 1);
    CHECK(log.size() == 1 + 1 + 1 + 8 + 1 + 1);
    CHECK(ng.connections_logged() <= 3);
    for (auto& l : log) CHECK(l.find(" 206 ") != std::string::npos);

    // A later execute reuses the idle connections instead of opening new ones.
    std::vector<std::byte> whole(s.data.size());
    src->read_exact(0, whole);
    CHECK(whole == s.data);
    CHECK(ng.connections_logged() <= 3);

    // Beyond the end: Truncated, naming the URL, without a request.
    const auto before = ng.access_log().size();
    auto e = expect_error([&] { src->read_exact(s.data.size() - 2, std::span(whole.data(), 3)); });
    CHECK(e.code() == errc::Truncated);
    CHECK(std::string(e.what()).find("/data/file.bin") != std::string::npos);
    CHECK(ng.access_log().size() == before);
}

TEST_CASE("a small object is opened with exactly one request; empty objects work") {
    site s;
    write_file(s.root / "small.bin", std::span(s.data.data(), 1000));
    write_file(s.root / "empty.bin", std::string());
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    auto src = open_url(ng.base_url() + "/small.bin");
    CHECK(src->size() == 1000);
    CHECK(std::equal(src->prefix().begin(), src->prefix().end(), s.data.begin(), s.data.begin() + 1000));
    CHECK(ng.access_log(1).size() == 1);
    auto empty = open_url(ng.base_url() + "/empty.bin");
    CHECK(empty->size() == 0);
    CHECK(empty->prefix().empty());
}

TEST_CASE("HTTPS verifies the server with the given CA and rejects it otherwise") {
    site s;
    test_ca ca = make_test_ca(s.tmp / "ca");
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", &ca, 1, 0});
    REQUIRE(ng.base_url().starts_with("https://"));
    http_options o = small_chunks();
    o.ca_file = ca.ca_cert.string();
    auto src = open_url(ng.base_url() + "/data/file.bin", o);
    std::vector<std::byte> whole(s.data.size());
    src->read_exact(0, whole);
    CHECK(whole == s.data);

    auto untrusted = expect_error([&] { open_url(ng.base_url() + "/data/file.bin", small_chunks()); });
    CHECK(untrusted.code() == errc::HttpError);
    CHECK(std::string(untrusted.what()).find("certificate verify failed") != std::string::npos);
    // The certificate names IP 127.0.0.1, not "localhost": host-name verification refuses it.
    auto wrong_name = expect_error([&] { open_url("https://localhost:" + std::to_string(ng.port()) + "/data/file.bin", o); });
    CHECK(wrong_name.code() == errc::HttpError);
    http_options insecure = small_chunks();
    insecure.verify_peer = false;
    CHECK(open_url("https://localhost:" + std::to_string(ng.port()) + "/data/file.bin", insecure)->size() == s.data.size());
    auto bad_ca = expect_error([&] { http_options b; b.ca_file = (s.tmp / "missing.pem").string(); open_url(ng.base_url() + "/x", b); });
    CHECK(bad_ca.code() == errc::InvalidArgument);
}

TEST_CASE("Hub-like redirect: bearer token to the origin, none to the CDN, final URL remembered") {
    site s;
    const std::uint16_t cdn_port = free_port();
    // The "Hub": demands the token, then redirects to the CDN, which refuses any Authorization.
    std::string hub =
        "    absolute_redirect off;\n"
        "    location /resolve/ { if ($http_authorization != 'Bearer hub-secret') { return 401; }\n"
        "      rewrite ^/resolve/(.*)$ http://127.0.0.1:" + std::to_string(cdn_port) + "/data/$1 redirect; }\n"
        "    location /relative/ { return 302 ../data/file.bin; }\n"
        "    location /rooted/ { return 307 /data/file.bin; }\n"
        "    location /loop/ { return 302 /loop/x; }\n";
    std::string cdn = "  server { listen 127.0.0.1:" + std::to_string(cdn_port) + "; root " + s.root.string() +
                      "; access_log " + (s.tmp / "nginx" / "logs" / "cdn.log").string() + " rs;\n"
                      "    location / { if ($http_authorization) { return 403; } } }\n";
    nginx_server ng(s.tmp / "nginx", {s.root, hub, cdn, nullptr, 1, 0});
    wait_for_port(cdn_port);

    http_options o = small_chunks();
    o.bearer_token = "hub-secret";
    auto src = open_url(ng.base_url() + "/resolve/file.bin", o);
    std::vector<std::byte> whole(s.data.size());
    src->read_exact(0, whole);
    CHECK(whole == s.data);
    CHECK(ng.access_log(1).size() == 1);  // only the first request went to the Hub: the final URL is remembered

    auto no_token = expect_error([&] { open_url(ng.base_url() + "/resolve/file.bin", small_chunks()); });
    CHECK(no_token.code() == errc::HttpError);
    CHECK(std::string(no_token.what()).find("401") != std::string::npos);

    // Relative Location values (nginx sends them as written with absolute_redirect off).
    CHECK(open_url(ng.base_url() + "/relative/x", small_chunks())->size() == s.data.size());
    CHECK(open_url(ng.base_url() + "/rooted/x", o)->size() == s.data.size());  // same origin: the token is kept

    http_options few = small_chunks();
    few.max_redirects = 3;
    auto loop = expect_error([&] { open_url(ng.base_url() + "/loop/x", few); });
    CHECK(loop.code() == errc::HttpError);
    CHECK(std::string(loop.what()).find("redirects") != std::string::npos);
}

TEST_CASE("a bearer-protected location answers 401 without the token") {
    site s;
    std::string conf = "    location /private/ { alias " + (s.root / "data").string() + "/;\n"
                       "      if ($http_authorization != 'Bearer tok') { return 401; } }\n";
    nginx_server ng(s.tmp / "nginx", {s.root, conf, "", nullptr, 1, 0});
    auto e = expect_error([&] { open_url(ng.base_url() + "/private/file.bin", small_chunks()); });
    CHECK(e.code() == errc::HttpError);
    CHECK(std::string(e.what()).find("HTTP 401") != std::string::npos);
    CHECK(std::string(e.what()).find(ng.base_url() + "/private/file.bin") != std::string::npos);
    http_options o = small_chunks();
    o.bearer_token = "tok";
    CHECK(open_url(ng.base_url() + "/private/file.bin", o)->size() == s.data.size());
    http_options h = small_chunks();
    h.headers.push_back({"Authorization", "Bearer tok"});
    CHECK(open_url(ng.base_url() + "/private/file.bin", h)->size() == s.data.size());
    auto missing = expect_error([&] { open_url(ng.base_url() + "/data/nope.bin", small_chunks()); });
    CHECK(std::string(missing.what()).find("HTTP 404") != std::string::npos);
}

TEST_CASE("a server that ignores ranges (max_ranges 0) fails clearly") {
    site s;
    nginx_server ng(s.tmp / "nginx", {s.root, "    max_ranges 0;\n", "", nullptr, 1, 0});
    auto e = expect_error([&] { open_url(ng.base_url() + "/data/file.bin", small_chunks()); });
    CHECK(e.code() == errc::RangeNotSupported);
    CHECK(std::string(e.what()).find("bytes 0-65535 of " + ng.base_url() + "/data/file.bin") != std::string::npos);
}

TEST_CASE("503 with Retry-After is retried after the advertised delay, then reported") {
    site s;
    nginx_server ng(s.tmp / "nginx", {s.root, "    location /busy/ { add_header Retry-After 1 always; return 503; }\n", "",
                                      nullptr, 1, 0});
    http_options o = small_chunks();
    o.max_attempts = 2;
    auto t0 = std::chrono::steady_clock::now();
    auto e = expect_error([&] { open_url(ng.base_url() + "/busy/file.bin", o); });
    auto waited = std::chrono::steady_clock::now() - t0;
    CHECK(e.code() == errc::HttpError);
    CHECK(std::string(e.what()).find("HTTP 503 with Retry-After") != std::string::npos);
    CHECK(ng.access_log(2).size() == 2);
    CHECK(waited >= std::chrono::milliseconds(950));  // the backoff alone would be ~1 ms
}

TEST_CASE("a file replaced on the server between requests is reported as ObjectChanged") {
    site s;
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    auto src = open_url(ng.base_url() + "/data/file.bin", small_chunks());
    auto changed = s.data;
    changed.resize(changed.size() - 1);
    write_file(s.root / "data" / "file.bin.new", changed);
    fs::rename(s.root / "data" / "file.bin.new", s.root / "data" / "file.bin");
    std::vector<std::byte> buf(1 << 20, std::byte{0});
    auto e = expect_error([&] { src->read_exact(1 << 20, buf); });
    CHECK(e.code() == errc::ObjectChanged);
    CHECK(std::all_of(buf.begin(), buf.end(), [](std::byte b) { return b == std::byte{0}; }));
}

namespace {

// Origin A (the nginx's main server, plain or TLS) redirects /go/PATH to origin B
// (127.0.0.1, another port, plain http) at /PATH. B serves data/ three ways:
// /strict/ refuses any credential-like header (403), /optin/ demands X-Api-Key: k
// (401) and refuses Cookie (403), /data/ takes anything.
struct two_origins {
    site s;
    std::uint16_t b_port = free_port();
    std::optional<test_ca> ca;
    std::optional<nginx_server> ng;
    // `a_extra`: more of A's server block ("B_PORT" in it replaced by B's port).
    explicit two_origins(bool tls, std::string a_extra = {}) {
        if (tls) ca = make_test_ca(s.tmp / "ca");
        const std::string b = "http://127.0.0.1:" + std::to_string(b_port);
        const std::string data = (s.root / "data").string();
        for (auto at = a_extra.find("B_PORT"); at != std::string::npos; at = a_extra.find("B_PORT"))
            a_extra.replace(at, 6, std::to_string(b_port));
        std::string a = "    location /go/ { rewrite ^/go/(.*)$ " + b + "/$1 redirect; }\n" + a_extra;
        std::string other =
            "  server { listen 127.0.0.1:" + std::to_string(b_port) + "; root " + s.root.string() + "; access_log " +
            (s.tmp / "nginx" / "logs" / "b.log").string() + " rs;\n"
            "    location /strict/ { alias " + data + "/;\n"
            "      if ($http_cookie) { return 403; } if ($http_x_api_key) { return 403; }\n"
            "      if ($http_x_trace) { return 403; } if ($http_authorization) { return 403; } }\n"
            "    location /optin/ { alias " + data + "/;\n"
            "      if ($http_x_api_key != 'k') { return 401; } if ($http_cookie) { return 403; } } }\n";
        ng.emplace(s.tmp / "nginx", nginx_config{s.root, a, other, ca ? &*ca : nullptr, 1, 0});
        wait_for_port(b_port);
    }
    std::string a(const std::string& path) const { return ng->base_url() + path; }
    // B's access log ("$connection $connection_requests $status $request_uri" lines).
    std::vector<std::string> b_log() const {
        std::vector<std::string> lines;
        std::ifstream in(s.tmp / "nginx" / "logs" / "b.log");
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        return lines;
    }
};

http_options with_credentials() {
    http_options o = small_chunks();
    o.headers = {{"Cookie", "session=1"}, {"X-Api-Key", "k"}, {"X-Trace", "t"}};
    o.bearer_token = "secret";
    return o;
}

}  // namespace

TEST_CASE("a redirect to another origin drops every caller header unless opted in") {
    two_origins t(false);
    http_options o = with_credentials();
    auto src = open_url(t.a("/go/strict/file.bin"), o);  // Cookie, X-Api-Key, X-Trace or Authorization: 403
    std::vector<std::byte> whole(t.s.data.size());
    src->read_exact(0, whole);
    CHECK(whole == t.s.data);

    auto needs_key = expect_error([&] { open_url(t.a("/go/optin/file.bin"), o); });
    CHECK(needs_key.code() == errc::HttpError);
    CHECK(std::string(needs_key.what()).find("HTTP 401") != std::string::npos);
    o.cross_origin_headers = {"x-api-key"};  // any case
    CHECK(open_url(t.a("/go/optin/file.bin"), o)->size() == t.s.data.size());

    http_options token = with_credentials();
    token.headers.clear();
    token.cross_origin_headers = {"Authorization"};  // the bearer token follows too
    auto sent = expect_error([&] { open_url(t.a("/go/strict/file.bin"), token); });
    CHECK(std::string(sent.what()).find("HTTP 403") != std::string::npos);
}

TEST_CASE("a redirect from https to http is refused, naming both URLs, unless allowed") {
    two_origins t(true);
    http_options o = small_chunks();
    o.ca_file = t.ca->ca_cert.string();
    const std::string from = t.a("/go/data/file.bin");
    REQUIRE(from.starts_with("https://"));
    auto e = expect_error([&] { open_url(from, o); });
    CHECK(e.code() == errc::HttpError);
    const std::string to = "http://127.0.0.1:" + std::to_string(t.b_port) + "/data/file.bin";
    CHECK(std::string(e.what()).find(from) != std::string::npos);
    CHECK(std::string(e.what()).find(to) != std::string::npos);
    o.allow_https_downgrade = true;
    CHECK(open_url(from, o)->size() == t.s.data.size());
}

TEST_CASE("a Location of any scheme but http and https is refused by name; nothing goes to its host") {
    // Each Location as a server sends it, from https and from http: s3:// (with B's port,
    // and with none: 443), other schemes, and file: without "//" (once taken for a relative path).
    const std::vector<std::string> locations = {
        "s3://127.0.0.1:B_PORT/data/file.bin", "s3://127.0.0.1/data/file.bin", "S3://127.0.0.1:B_PORT/data/file.bin",
        "ftp://127.0.0.1:B_PORT/data/file.bin", "gs://bucket/data/file.bin", "hf://org/name/file.bin",
        "file:///etc/passwd", "file:/etc/passwd", "s3://127.0.0.1:B_PORT/data/file.bin?X-Amz-Signature=LOCSECRET"};
    std::string routes;
    for (std::size_t i = 0; i < locations.size(); ++i)
        routes += "    location = /to/" + std::to_string(i) + " { return 302 \"" + locations[i] + "\"; }\n";
    for (const bool tls : {true, false}) {
        INFO((tls ? "from https" : "from http"));
        two_origins t(tls, routes);
        http_options o = small_chunks();
        if (tls) o.ca_file = t.ca->ca_cert.string();
        o.allow_https_downgrade = true;  // governs https -> http only
        for (std::size_t i = 0; i < locations.size(); ++i) {
            std::string loc = locations[i];
            if (auto at = loc.find("B_PORT"); at != std::string::npos) loc.replace(at, 6, std::to_string(t.b_port));
            INFO(loc);
            const std::string from = t.a("/to/" + std::to_string(i));
            auto e = expect_error([&] { open_url(from, o); });
            CHECK(e.code() == errc::HttpError);
            CHECK_THAT(e.what(), Catch::Contains("refused a redirect from " + from) &&
                                     Catch::Contains("only http and https Locations are followed") &&
                                     !Catch::Contains("LOCSECRET"));
            CHECK_THAT(e.what(), Catch::Contains(loc.substr(0, loc.find('?'))));
        }
        // B answers what does reach it (its log is written in order): only this request.
        CHECK(open_url(t.a("/go/data/file.bin"), o)->size() == t.s.data.size());
        for (int i = 0; i < 100 && t.b_log().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const auto b = t.b_log();
        REQUIRE(b.size() == 1);
        CHECK_THAT(b[0], Catch::Contains(" /data/file.bin "));  // "CONN N STATUS URI BYTES"
    }
}

TEST_CASE("the CLI's --cross-origin-header and --allow-downgrade") {
    two_origins plain(false), tls(true);
    for (two_origins* t : {&plain, &tls}) {
        writer w((t->s.root / "data" / "m.safetensors").string());
        w.add("x", dtype::U8, {3}, std::vector<std::byte>(3));
        w.finish();
        make_world_readable(t->s.root);
    }
    auto ls = [](const std::string& env, const std::string& url, const std::string& flags) {
        return run_command(env + " " + cli_path() + " ls " + url + " " + flags + " 2>&1");
    };
    // HF_TOKEN goes to the "Hub" (HF_ENDPOINT) only; the redirect to B drops it unless opted in.
    const std::string hub = "HF_ENDPOINT=" + plain.a("") + " HF_TOKEN=secret";
    CHECK(ls(hub, plain.a("/go/strict/m.safetensors"), "").status == 0);
    auto r = ls(hub, plain.a("/go/strict/m.safetensors"), "--cross-origin-header Authorization");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains("HTTP 403"));

    const std::string trust = "SSL_CERT_FILE=" + tls.ca->ca_cert.string();
    r = ls(trust, tls.a("/go/data/m.safetensors"), "");
    CHECK(r.status == 1);
    CHECK_THAT(r.out, Catch::Contains("https to http"));
    CHECK(ls(trust, tls.a("/go/data/m.safetensors"), "--allow-downgrade").status == 0);
}

TEST_CASE("a presigned URL's signing values appear in no message about its source, the rest of it does") {
    site s;
    nginx_server ng(s.tmp / "nginx", {s.root, "", "", nullptr, 1, 0});
    const std::string url = ng.base_url() +
                            "/data/file.bin?X-Amz-Credential=CREDSECRET&X-Amz-Signature=SIGSECRET&sv=2025&sig=SASSECRET";
    auto src = open_url(url, small_chunks());
    CHECK(src->name() == url);  // the source keeps its URL whole: it is what a shard or a reopen asks for
    std::vector<std::byte> three(3);
    const std::string truncated = kind_of([&] { src->read_exact(s.data.size() - 2, three); });
    const std::string header = kind_of([&] { (void)reader::open(url); });  // not a safetensors file
    for (const std::string& m : {truncated, header}) {
        INFO(m);
        CHECK(m.find("/data/file.bin?X-Amz-Credential=...&X-Amz-Signature=...&sv=2025&sig=...") != std::string::npos);
        CHECK(m.find("SECRET") == std::string::npos);
    }
    CHECK_THAT(truncated, Catch::StartsWith("Truncated"));
}
