// gs:// sources against a real fake-gcs-server (started by the test), with
// the GCS stand-in in front of it where credentials or faults are checked
// (tests/support/gcs_standin.py: a token endpoint verifying the service
// account's RS256 JWT with openssl, the metadata server, issued tokens
// required): every byte exact over parallel ranges, generation pinning,
// token refresh, credentials never sent to another host, hostile answers.
// Exits 77 (skipped) when fake-gcs-server or python3 is missing (in the first
// case, before any result); a case that needs openssl or curl SKIPs without it.
#include <catch2/catch.hpp>

#include <cstdlib>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "checkpoint_bytes.hpp"
#include "ringsafe/asio.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/reader.hpp"
#include "store_servers.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

constexpr const char* object_url = "gs://models/dir/model file.bin";

// One fake-gcs-server for the program, bucket "models" holding "dir/model file.bin"
// and "tiny.safetensors".
struct gcs {
    temp_dir tmp;
    std::vector<std::byte> data = std::vector<std::byte>((3u << 20) + 77);
    fs::path root = tmp / "data";
    fake_gcs_server server;
    static fs::path prepare(const temp_dir& t, std::vector<std::byte>& d) {
        fill_pattern(d, 7);
        fs::create_directories(t / "data" / "models" / "dir");
        write_file(t / "data" / "models" / "dir" / "model file.bin", d);
        write_file(t / "data" / "models" / "tiny.safetensors", build_file({{"w", "U8", {1000}, 1000}}).bytes);
        return t / "data";
    }
    gcs() : server((prepare(tmp, data), root), tmp.path()) {}
};

gcs& the_gcs() {
    static gcs g;
    return g;
}

// A service account whose token endpoint is a GCS stand-in (in front of `g`,
// issued tokens required, `extra` arguments), its files and logs in `dir`.
struct token_site {
    temp_dir dir;
    std::uint16_t port = free_port();
    test_service_account sa;
    standin front;
    explicit token_site(const gcs& g, std::vector<std::string> extra = {})
        : sa(make_service_account(dir.path(), "http://127.0.0.1:" + std::to_string(port) + "/token")),
          front(gcs_standin(with(extra, {"--port", std::to_string(port), "--upstream", g.server.endpoint(),
                                         "--public-key", sa.public_key.string(), "--client-email", sa.email,
                                         "--require-token"}),
                            dir.path())) {}
    static std::vector<std::string> with(std::vector<std::string> extra, std::vector<std::string> args) {
        args.insert(args.end(), extra.begin(), extra.end());
        return args;
    }
};

source_options options(const std::string& endpoint) {
    source_options o = store_test_options();
    o.stores.gcs.endpoint = endpoint;
    return o;
}

}  // namespace

TEST_CASE("gs:// from fake-gcs-server, anonymous: every byte exact over parallel ranges") {
    auto& g = the_gcs();
    source_options o = options(g.server.endpoint());
    o.stores.gcs.anonymous = true;
    auto src = open_url(object_url, o);
    CHECK(src->name() == object_url);
    REQUIRE(src->size() == g.data.size());
    std::vector<std::byte> all(g.data.size());
    src->read_exact(0, all);
    CHECK(all == g.data);
    SECTION("the emulator's variable gives the endpoint, and its requests are anonymous") {
        scoped_env e("STORAGE_EMULATOR_HOST", g.server.endpoint().substr(7));  // host:port, as the Python client takes it
        scoped_env c("GOOGLE_APPLICATION_CREDENTIALS", (g.tmp / "no-such-file.json").string());
        CHECK(read_url(object_url, source_options{}) == g.data);
    }
    SECTION("a missing object is HttpError 404 naming the URL") {
        CHECK_THAT(kind_of([&] { open_url("gs://models/missing.bin", o); }),
                   Catch::Contains("HttpError") && Catch::Contains("404") && Catch::Contains("/models/missing.bin"));
    }
}

TEST_CASE("gs:// with a key the token endpoint cannot verify: refused, naming the endpoint, never the key") {
    if (!have_program("openssl")) SKIP("openssl is not installed");
    auto& g = the_gcs();
    temp_dir t;
    fs::create_directories(t / "known");
    fs::create_directories(t / "rogue");
    const std::uint16_t port = free_port();
    const std::string token_uri = "http://127.0.0.1:" + std::to_string(port) + "/token";
    test_service_account known = make_service_account(t / "known", token_uri);
    test_service_account rogue = make_service_account(t / "rogue", token_uri);  // another key, same name
    standin front = gcs_standin({"--port", std::to_string(port), "--upstream", g.server.endpoint(), "--public-key",
                                 known.public_key.string(), "--client-email", known.email, "--require-token"},
                                t.path());
    source_options o = options(front.base_url());
    o.stores.gcs.credentials_file = rogue.json.string();
    const std::string k = kind_of([&] { open_url(object_url, o); });
    CHECK_THAT(k, Catch::Contains("HttpError") && Catch::Contains(token_uri) && Catch::Contains("invalid_grant") &&
                      Catch::Contains(rogue.json.string()));
    CHECK_THAT(k, !Catch::Contains("PRIVATE KEY"));
    CHECK(count_lines(front.log(), {"\"GET\"", "/models/"}) == 0);  // nothing was asked of the bucket
    o.stores.gcs.credentials_file = known.json.string();
    CHECK(read_url(object_url, o) == g.data);
}

TEST_CASE("gs:// with GOOGLE_APPLICATION_CREDENTIALS: token fetched once, pinned generation, bytes exact") {
    if (!have_program("openssl")) SKIP("openssl is not installed");
    auto& g = the_gcs();
    token_site site(g);
    const test_service_account& sa = site.sa;
    standin& front = site.front;
    scoped_env e("GOOGLE_APPLICATION_CREDENTIALS", sa.json.string());
    CHECK(read_url(object_url, options(front.base_url())) == g.data);
    const auto log = front.log();
    CHECK(count_lines(log, {"\"POST\"", "/token", "\"status\": 200"}) == 1);
    const std::size_t gets = count_lines(log, {"\"GET\"", "/models/dir/model%20file.bin"});
    CHECK(gets >= 13);
    CHECK(count_lines(log, {"\"GET\"", "\"token_ok\": true", "\"status\": 206"}) == gets);
    // Every request after the first reads the generation the first one saw.
    CHECK(count_lines(log, {"\"GET\"", "\"query\": \"generation="}) == gets - 1);
}

TEST_CASE("gs:// refreshes a token before it expires (expires_in 0: a new token per request)") {
    if (!have_program("openssl")) SKIP("openssl is not installed");
    auto& g = the_gcs();
    token_site site(g, {"--expires-in", "0"});
    const test_service_account& sa = site.sa;
    standin& front = site.front;
    source_options o = options(front.base_url());
    o.stores.gcs.credentials_file = sa.json.string();
    CHECK(read_url(object_url, o) == g.data);
    const auto log = front.log();
    const std::size_t gets = count_lines(log, {"\"GET\"", "\"status\": 206"});
    CHECK(count_lines(log, {"\"POST\"", "/token", "\"status\": 200"}) == gets);
}

TEST_CASE("gs:// from the metadata server named by GCE_METADATA_HOST (Metadata-Flavor: Google)") {
    auto& g = the_gcs();
    temp_dir t;
    standin front = gcs_standin({"--upstream", g.server.endpoint(), "--require-token"}, t.path());
    scoped_env e("GCE_METADATA_HOST", front.base_url().substr(7));
    CHECK(read_url(object_url, options(front.base_url())) == g.data);
    CHECK(count_lines(front.log(), {"/computeMetadata/v1/instance/service-accounts/default/token", "\"status\": 200"}) == 1);
    SECTION("RUNAI_STREAMER_GCS_USE_ANONYMOUS_CREDENTIALS=1 sends none (the stand-in answers 401)") {
        scoped_env a("RUNAI_STREAMER_GCS_USE_ANONYMOUS_CREDENTIALS", "1");
        CHECK_THAT(kind_of([&] { open_url(object_url, options(front.base_url())); }),
                   Catch::Contains("HttpError") && Catch::Contains("401"));
    }
}

TEST_CASE("gs:// with HMAC keys signs each request with GOOG4-HMAC-SHA256, its generation query included") {
    auto& g = the_gcs();
    temp_dir t;
    // The stand-in checks each signature as GCS does: over the target as sent,
    // so a request asking for the pinned ?generation= must have signed it.
    standin front = gcs_standin({"--upstream", g.server.endpoint(), "--hmac-id", "GOOG1ERINGSAFETEST", "--hmac-secret",
                                 "ringsafe-test-secret"},
                                t.path());
    source_options o = options(front.base_url());
    o.stores.gcs.hmac_access_id = "GOOG1ERINGSAFETEST";
    o.stores.gcs.hmac_secret = "ringsafe-test-secret";
    CHECK(read_url(object_url, o) == g.data);
    const auto log = front.log();
    CHECK(count_lines(log, {"\"authorization\": \"GOOG4-HMAC-SHA256\"", "\"status\": 206"}) == log.size());
    CHECK(count_lines(log, {"\"query\": \"generation="}) == log.size() - 1);
    o.stores.gcs.hmac_secret = "another-secret";
    CHECK_THAT(kind_of([&] { open_url(object_url, o); }), Catch::Contains("HttpError") && Catch::Contains("403"));
    o.stores.gcs.hmac_secret.clear();
    CHECK_THAT(kind_of([&] { open_url(object_url, o); }), Catch::Contains("InvalidArgument") && Catch::Contains(object_url));
}

TEST_CASE("gs:// credentials never follow a redirect to another host") {
    auto& g = the_gcs();
    temp_dir t;
    standin other = gcs_standin({"--upstream", g.server.endpoint()}, t.path());
    standin front = gcs_standin({"--upstream", g.server.endpoint(), "--fault", "redirect:" + other.base_url(),
                                 "--fault-after", "0"},
                                t.path());
    scoped_env e("GCE_METADATA_HOST", front.base_url().substr(7));
    CHECK(read_url(object_url, options(front.base_url())) == g.data);
    const auto seen = other.log();
    REQUIRE(count_lines(seen, {"\"GET\"", "/models/"}) >= 13);
    CHECK(count_lines(seen, {"\"authorization\": \"none\""}) == seen.size());
    SECTION("a redirect to a scheme that is not http(s) is an error naming it") {
        standin odd = gcs_standin({"--upstream", g.server.endpoint(), "--fault", "redirect:ftp://127.0.0.1:1",
                                   "--fault-after", "0"},
                                  t.path());
        source_options o = options(odd.base_url());
        o.stores.gcs.anonymous = true;
        CHECK_THAT(kind_of([&] { open_url(object_url, o); }), Catch::Contains("ftp://127.0.0.1:1"));
    }
}

TEST_CASE("gs:// hostile answers: wrong Content-Range, short bodies, a generation that changes") {
    auto& g = the_gcs();
    temp_dir t;
    auto open_with = [&](std::vector<std::string> fault) {
        std::vector<std::string> args{"--upstream", g.server.endpoint()};
        args.insert(args.end(), fault.begin(), fault.end());
        return gcs_standin(args, t.path());
    };
    auto read_from = [&](const standin& s) {
        source_options o = options(s.base_url());
        o.stores.gcs.anonymous = true;
        return read_url(object_url, o);
    };
    SECTION("a shifted Content-Range is RangeNotSupported, never a stray write") {
        standin s = open_with({"--fault", "badrange"});
        CHECK_THAT(kind_of([&] { read_from(s); }), Catch::Contains("RangeNotSupported") && Catch::Contains("Content-Range"));
    }
    SECTION("a body cut short once is resumed after the bytes received") {
        standin s = open_with({"--fault", "short", "--fault-count", "3"});
        CHECK(read_from(s) == g.data);
    }
    SECTION("another x-goog-generation mid-read is ObjectChanged") {
        standin s = open_with({"--fault", "generation"});
        CHECK_THAT(kind_of([&] { read_from(s); }), Catch::Contains("ObjectChanged") && Catch::Contains("x-goog-generation"));
    }
    SECTION("an answer that names no generation once one is pinned is ObjectChanged: the pin cannot be bypassed") {
        // The server passes no generation on and names none: it serves whatever is current.
        standin s = open_with({"--fault", "nogeneration"});
        CHECK_THAT(kind_of([&] { read_from(s); }),
                   Catch::Contains("ObjectChanged") && Catch::Contains("x-goog-generation") && Catch::Contains("names none"));
    }
}

TEST_CASE("gs:// object replaced between open and read: the pinned generation is gone, ObjectChanged") {
    if (!have_program("curl")) SKIP("curl is not installed");
    temp_dir t;
    std::vector<std::byte> v1(1 << 20), v2(1 << 20);
    fill_pattern(v1, 1);
    fill_pattern(v2, 2);
    fs::create_directories(t / "data" / "b");
    write_file(t / "data" / "b" / "o", v1);
    fake_gcs_server server(t / "data", t.path());
    source_options o = options(server.endpoint());
    o.stores.gcs.anonymous = true;
    auto src = open_url("gs://b/o", o);
    write_file(t / "v2", v2);
    REQUIRE(run_command("curl -s -o /dev/null -X POST --data-binary @'" + (t / "v2").string() + "' '" + server.endpoint() +
                        "/upload/storage/v1/b/b/o?uploadType=media&name=o'")
                .status == 0);
    std::vector<std::byte> all(src->size());
    CHECK_THAT(kind_of([&] { src->read_exact(0, all); }), Catch::Contains("ObjectChanged") && Catch::Contains("generation"));
}

TEST_CASE("gs:// through the Asio front end: the token is fetched on the caller's executor") {
    if (!have_program("openssl")) SKIP("openssl is not installed");
    auto& g = the_gcs();
    token_site site(g);
    const test_service_account& sa = site.sa;
    standin& front = site.front;
    reader_options ro;
    ro.source = options(front.base_url());
    ro.source.stores.gcs.credentials_file = sa.json.string();
    boost::asio::io_context io;
    std::size_t tensors = 0;
    std::string failure;
    ringsafe::status st;
    boost::asio::co_spawn(io, [&]() -> boost::asio::awaitable<void> {
        try {
            auto r = co_await asio::async_open(io.get_executor(), "gs://models/tiny.safetensors", ro, st,
                                            boost::asio::use_awaitable);
            tensors = r.get().tensors().size();
        } catch (const std::exception&) {
            failure = st.message;
        }
    }, boost::asio::detached);
    io.run();  // one thread: the token request and the first range request both ran on it
    CHECK(failure == "");
    CHECK(tensors == 1);
    CHECK(count_lines(front.log(), {"\"POST\"", "/token", "\"status\": 200"}) == 1);
}
