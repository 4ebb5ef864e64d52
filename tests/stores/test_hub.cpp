// hf:// through the public API against the Hub stand-in
// (tests/support/hub_standin.cpp): resolve answers 302 to an nginx CDN that
// checks the presigned URLs and answers 400 to any request carrying
// Authorization. A sharded repo read with every shard pinned at the index's
// commit, a branch that moves mid-load, presigned URLs that expire (re-resolved
// at the pinned commit, the read resumed), gated and private repos, hostile
// answers (redirects to other schemes and hosts, a wrong Content-Range, short
// bodies, a size that changes), the Hub cache read with no request and
// written only complete, offline, and the Asio front end.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <system_error>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include "checkpoint_bytes.hpp"
#include "http_harness.hpp"
#include "ringsafe/asio.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/reader.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

using files = std::map<std::string, std::vector<std::byte>>;

const char* const hub_vars[] = {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_HOME", "HF_HUB_CACHE",
                                "HUGGINGFACE_HUB_CACHE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT",
                                "HF_HUB_DISABLE_IMPLICIT_TOKEN"};

// A stand-in, a cache folder, and reader options pointing at both; no HF_* variable set.
struct hub_site {
    temp_dir tmp;
    hub_standin hub{tmp / "hub"};
    fs::path cache = tmp / "cache";
    hub_site() {
        for (const char* v : hub_vars) ::unsetenv(v);
        ::setenv("HF_HOME", (tmp / "hf_home").c_str(), 1);  // no token file of the machine's
    }
    reader_options options() const {
        reader_options ro;
        ro.source.stores.hub.endpoint = hub.endpoint();
        ro.source.stores.hub.cache_dir = cache.string();
        auto& h = ro.source.http;
        h.prefetch = 4096;
        h.chunk_size = 64u << 10;
        h.connections_per_origin = 4;
        h.retry_base_delay = 1ms;
        h.retry_max_delay = 5ms;
        return ro;
    }
    // Lines of the stand-in's request log holding `part`.
    std::size_t requests_with(const std::string& part) const {
        auto log = hub.requests();
        return static_cast<std::size_t>(std::count_if(log.begin(), log.end(), [&](const std::string& l) {
            return l.find(part) != std::string::npos;
        }));
    }
};

std::vector<std::byte> flipped(std::vector<std::byte> v) {
    for (auto& b : v) b ^= std::byte{0xFF};
    return v;
}

// Three shards and their index; with `flip`, every tensor's bytes inverted (another commit's).
files sharded_repo(bool flip = false) {
    files f;
    std::string weight_map;
    const std::vector<std::vector<tensor_spec>> shards = {
        {{"a", "F32", {1000, 30}, 120'000}, {"b", "U8", {4099}, 4099}},
        {{"c", "BF16", {64, 64}, 8192}},
        {{"d", "I64", {20'000}, 160'000}, {"e", "F16", {3, 5}, 30}},
    };
    for (std::size_t i = 0; i < shards.size(); ++i) {
        const std::string name = "model-0000" + std::to_string(i + 1) + "-of-00003.safetensors";
        built_file b = build_file(shards[i]);
        if (flip)
            for (std::size_t k = b.data_start; k < b.bytes.size(); ++k) b.bytes[k] ^= std::byte{0xFF};
        f[name] = b.bytes;
        for (auto& t : shards[i]) weight_map += (weight_map.empty() ? "\"" : ",\"") + t.name + "\":\"" + name + "\"";
    }
    const std::string index = "{\"metadata\":{\"total_size\":292321},\"weight_map\":{" + weight_map + "}}";
    f["model.safetensors.index.json"] = std::vector<std::byte>(reinterpret_cast<const std::byte*>(index.data()),
                                                               reinterpret_cast<const std::byte*>(index.data()) + index.size());
    f["config.json"] = std::vector<std::byte>{std::byte{'{'}, std::byte{'}'}};
    return f;
}

std::vector<std::byte> single_file(std::uint64_t bytes = 300'000) {
    return build_file({{"w", "U8", {bytes}, bytes}, {"x", "F32", {100}, 400}}).bytes;
}

}  // namespace

TEST_CASE("a sharded repo: every shard pinned at the commit the index came from, the token at the Hub only") {
    hub_site s;
    const std::string commit = s.hub.add_repo("org/sharded", sharded_repo());
    reader_options ro = s.options();
    ro.source.stores.hub.token = "hf_test_token_for_the_hub";
    auto r = reader::open("hf://org/sharded", ro);
    CHECK(r.spec() == "hf://org/sharded");
    REQUIRE(r.shards().size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
        CHECK(r.shards()[i].spec == "hf://org/sharded@" + commit + "/model-0000" + std::to_string(i + 1) + "-of-00003.safetensors");
        CHECK(r.shards()[i].file.empty());  // read over the network
    }
    for (auto& [name, bytes] : read_tensors(r)) {
        INFO(name);
        CHECK(bytes == tensor_bytes(name, bytes.size()));
    }
    // One resolve at "main" (the index), the shards at the commit; the token on every Hub request, none at the CDN.
    CHECK(s.requests_with("/resolve/main/") == 1);
    CHECK(s.requests_with("/resolve/" + commit + "/model-0000") == 3);
    for (auto& l : s.hub.requests()) CHECK_THAT(l, Catch::EndsWith(" auth"));
    CHECK(s.hub.cdn_auth_refused() == 0);
    auto cdn = s.hub.cdn_log();
    CHECK(cdn.size() >= 3);
    for (auto& l : cdn) {
        CHECK_THAT(l, Catch::Contains(" 206 "));
        CHECK_THAT(l, Catch::Contains("cred=STANDIN%2F20260101%2F"));  // the presigned query as given, not re-encoded
    }
    // The index named explicitly, and a shard alone.
    CHECK(reader::open("hf://org/sharded/model.safetensors.index.json", ro).shards().size() == 3);
    auto one = reader::open("hf://org/sharded/model-00002-of-00003.safetensors", ro);
    CHECK(one.shards()[0].spec == "hf://org/sharded@" + commit + "/model-00002-of-00003.safetensors");
    CHECK(read_tensors(one).at("c") == tensor_bytes("c", 8192));
}

TEST_CASE("a branch that moves during a load: every shard comes from the commit of the first answer") {
    hub_site s;
    const std::string c1 = s.hub.add_repo("org/moving", sharded_repo(false));
    const std::string c2 = s.hub.add_repo("org/moving", sharded_repo(true), "");
    // After the next resolve of main (the index's), main points at c2.
    s.hub.control("org/moving", "move", "1 main " + c2);
    auto r = reader::open("hf://org/moving", s.options());
    for (auto& sh : r.shards()) CHECK_THAT(sh.spec, Catch::Contains("@" + c1 + "/"));
    for (auto& [name, bytes] : read_tensors(r)) {
        INFO(name);
        CHECK(bytes == tensor_bytes(name, bytes.size()));  // c1's bytes, none of c2's
    }
    CHECK(s.requests_with("/resolve/" + c2) == 0);
    // main did move: a new open reads c2 whole.
    auto r2 = reader::open("hf://org/moving", s.options());
    for (auto& sh : r2.shards()) CHECK_THAT(sh.spec, Catch::Contains("@" + c2 + "/"));
    for (auto& [name, bytes] : read_tensors(r2)) CHECK(bytes == flipped(tensor_bytes(name, bytes.size())));
}

TEST_CASE("an expired presigned URL is resolved again at the pinned commit and the read goes on") {
    for (const bool gone : {false, true}) {
        INFO((gone ? "410" : "403"));
        hub_site s;
        const auto data = single_file(1'000'000);
        const std::string commit = s.hub.add_repo("org/expiring", {{"model.safetensors", data}});
        s.hub.control("org/expiring", "ttl", "1");
        if (gone) s.hub.control("org/expiring", "gone", "1");
        auto src = open_url("hf://org/expiring/model.safetensors", s.options().source.http, s.options().source.stores);
        CHECK(src->name() == "hf://org/expiring@" + commit + "/model.safetensors");
        // main moves meanwhile: the second resolve must still ask for the commit.
        s.hub.add_repo("org/expiring", {{"model.safetensors", flipped(data)}});
        std::this_thread::sleep_for(2100ms);  // the presigned URL expires (Expires is in whole seconds)
        std::vector<std::byte> got(data.size());
        src->read_exact(0, got);
        CHECK(got == data);
        CHECK(s.requests_with("/resolve/main/") == 1);
        CHECK(s.requests_with("/resolve/" + commit + "/model.safetensors") >= 1);
        auto cdn = s.hub.cdn_log();
        CHECK(std::count_if(cdn.begin(), cdn.end(), [&](const std::string& l) {
                  return l.find(gone ? " 410 " : " 403 ") != std::string::npos;
              }) >= 1);
    }
}

TEST_CASE("a gated or private repo without a token names the repo and asks for one; a token is never shown") {
    hub_site s;
    s.hub.add_repo("org/gated", {{"model.safetensors", single_file()}});
    s.hub.control("org/gated", "gated", "hf_the_right_token");
    s.hub.add_repo("org/private", {{"model.safetensors", single_file()}});
    s.hub.control("org/private", "private", "hf_the_right_token");

    auto e = expect_error([&] { reader::open("hf://org/gated/model.safetensors", s.options()); });
    CHECK(e.code() == errc::HttpError);
    CHECK_THAT(e.what(), Catch::Contains("HTTP 401") && Catch::Contains("org/gated") &&
                             Catch::Contains("gated: a token is needed") && Catch::Contains("HF_TOKEN"));
    e = expect_error([&] { reader::open("hf://org/private", s.options()); });
    CHECK_THAT(e.what(), Catch::Contains("HTTP 401") && Catch::Contains("org/private") && Catch::Contains("token is needed"));

    reader_options wrong = s.options();
    wrong.source.stores.hub.token = "hf_wrong_SECRET_token";
    e = expect_error([&] { reader::open("hf://org/gated/model.safetensors", wrong); });
    CHECK_THAT(e.what(), Catch::Contains("HTTP 403") && Catch::Contains("hub_options::token") &&
                             Catch::Contains("org/gated") && !Catch::Contains("hf_wrong_SECRET_token"));
    ::setenv("HF_TOKEN", "hf_env_SECRET_token", 1);
    e = expect_error([&] { reader::open("hf://org/gated/model.safetensors", s.options()); });
    CHECK_THAT(e.what(), Catch::Contains("from HF_TOKEN") && !Catch::Contains("hf_env_SECRET_token"));
    ::setenv("HF_TOKEN", "hf_the_right_token", 1);
    CHECK(read_tensors(*std::make_unique<reader>(reader::open("hf://org/gated/model.safetensors", s.options()))).at("x").size() == 400);
    ::unsetenv("HF_TOKEN");
    reader_options right = s.options();
    right.source.http.bearer_token = "hf_the_right_token";  // Python's token=: the Hub's token too
    CHECK(reader::open("hf://org/private", right).tensors().size() == 2);
    // Not even when the caller lets Authorization follow redirects: the Hub's token stays at the Hub.
    right.source.http.cross_origin_headers = {"Authorization"};
    CHECK(read_tensors(*std::make_unique<reader>(reader::open("hf://org/private", right))).at("x").size() == 400);
    CHECK(s.hub.cdn_auth_refused() == 0);

    // What is not there, each named.
    e = expect_error([&] { reader::open("hf://org/private/nope.safetensors", right); });
    CHECK_THAT(e.what(), Catch::Contains("404") && Catch::Contains("no file 'nope.safetensors' in model org/private") &&
                             Catch::Contains("bytes 0-4095 of " + s.hub.endpoint() + "/org/private/resolve/main/nope.safetensors"));
    e = expect_error([&] { reader::open("hf://org/private@v9/model.safetensors", right); });
    CHECK_THAT(e.what(), Catch::Contains("RevisionNotFound") && Catch::Contains("'v9'"));
    e = expect_error([&] { reader::open("hf://org/nothing-here/model.safetensors", right); });
    CHECK_THAT(e.what(), Catch::Contains("RepoNotFound") && Catch::Contains("org/nothing-here"));
}

TEST_CASE("hostile answers: other schemes refused, other hosts get no token, lying ranges, short bodies, a size that changes") {
    hub_site s;
    fault_server faults(s.tmp / "faults");
    const auto data = single_file();
    reader_options ro = s.options();
    ro.source.stores.hub.token = "hf_hostile_test_token";
    auto repo = [&](const std::string& name, const std::string& control, const std::string& text) {
        s.hub.add_repo("org/" + name, {{"model.safetensors", data}});
        if (!control.empty()) s.hub.control("org/" + name, control, text);
        return "hf://org/" + name + "/model.safetensors";
    };
    // A Location of another scheme: refused by name, nothing fetched from it, nothing cached
    // (s3:// at the CDN's port once went there over plain TCP, "GET commits/...", and was cached).
    const std::string cdn_port = std::to_string(s.hub.cdn_port());
    const auto cdn_before = s.hub.cdn_log().size();
    reader_options caching = ro;
    caching.source.stores.hub.cache = true;
    for (const std::string& to : std::vector<std::string>{"ftp://127.0.0.1/{rel}", "file://{file}", "s3://127.0.0.1:" + cdn_port + "{rel}?{query}",
                                 "s3://127.0.0.1{rel}?{query}", "gs://bucket{rel}"}) {
        INFO(to);
        auto e = expect_error([&] { read_tensors(*std::make_unique<reader>(reader::open(repo("scheme", "cdn", to), caching))); });
        CHECK(e.code() == errc::HttpError);
        CHECK_THAT(e.what(), Catch::Contains("'" + to.substr(0, 4)) && Catch::Contains("only http and https Locations"));
    }
    CHECK_FALSE(fs::exists(s.cache / "models--org--scheme"));
    reader_options downgrade = caching;
    downgrade.source.http.allow_https_downgrade = true;  // it governs https -> http alone
    CHECK(expect_error([&] { reader::open(repo("scheme", "cdn", "s3://127.0.0.1:" + cdn_port + "{rel}?{query}"), downgrade); })
              .code() == errc::HttpError);
    CHECK(s.hub.cdn_log().size() == cdn_before);
    // Another host (127.0.0.2): served, without the token.
    const std::string other = repo("host", "cdn", "http://127.0.0.2:" + std::to_string(s.hub.cdn_port()) + "{rel}?{query}");
    CHECK(read_tensors(*std::make_unique<reader>(reader::open(other, ro))).at("w") == tensor_bytes("w", 300'000));
    CHECK(s.hub.cdn_auth_refused() == 0);
    // A CDN that shifts Content-Range: RangeNotSupported, never a byte misplaced.
    const std::string fault = faults.base_url() + "/cdn?file={file}&";
    auto e = expect_error([&] { read_tensors(*std::make_unique<reader>(reader::open(repo("badrange", "cdn", fault + "fault=badrange&skip=1"), ro))); });
    CHECK(e.code() == errc::RangeNotSupported);
    // Short bodies: resumed after the bytes received when it recovers, an HttpError when it never does.
    auto r = reader::open(repo("short", "cdn", fault + "fault=close&after=5000&skip=1&fail=3&id=short"), ro);
    CHECK(read_tensors(r).at("w") == tensor_bytes("w", 300'000));
    ro.source.http.max_attempts = 2;
    e = expect_error([&] { read_tensors(*std::make_unique<reader>(reader::open(repo("dead", "cdn", fault + "fault=close&after=0&skip=1&id=dead"), ro))); });
    CHECK(e.code() == errc::HttpError);
    // X-Linked-Size that disagrees with what the CDN serves: ObjectChanged at open.
    e = expect_error([&] { reader::open(repo("size", "size_delta", "1"), ro); });
    CHECK(e.code() == errc::ObjectChanged);
    CHECK_THAT(e.what(), Catch::Contains("X-Linked-Size " + std::to_string(data.size() + 1)));
    // An endpoint that is not a Hub (no X-Repo-Commit).
    reader_options not_hub = ro;
    not_hub.source.stores.hub.endpoint = faults.base_url();
    e = expect_error([&] { reader::open("hf://org/x/model.safetensors", not_hub); });
    CHECK_THAT(e.what(), Catch::Contains("no X-Repo-Commit"));
    // A signature the CDN refuses every time: an error whose message does not show it.
    e = expect_error([&] { reader::open(repo("badsig", "cdn", "http://127.0.0.1:" + std::to_string(s.hub.cdn_port()) +
                                                                 "{rel}?Expires=1&Signature=SECRETSIG&cred=x"), ro); });
    CHECK_THAT(e.what(), Catch::Contains("403") && Catch::Contains("Signature=...") && !Catch::Contains("SECRETSIG"));
    CHECK(s.hub.cdn_auth_refused() == 0);
    for (auto& l : s.hub.cdn_log()) CHECK_THAT(l, !Catch::Contains("hf_hostile_test_token"));
}

TEST_CASE("the Hub cache: a file there is read as a local file with no request; cache=true writes only whole files") {
    hub_site s;
    const std::string commit = s.hub.add_repo("org/cached", sharded_repo());
    reader_options ro = s.options();
    ro.source.stores.hub.cache = true;
    {
        auto r = reader::open("hf://org/cached", ro);
        // One tensor read: its shard is not complete, so it is not published.
        auto sel = r.select({"a"});
        std::vector<std::byte> a(120'000);
        std::vector<std::span<std::byte>> dst{a};
        r.read(sel, dst);
        CHECK(a == tensor_bytes("a", a.size()));
    }
    const fs::path repo = s.cache / "models--org--cached";
    const fs::path snap = repo / "snapshots" / commit;
    CHECK(fs::is_symlink(snap / "model.safetensors.index.json"));  // read whole at open
    CHECK_FALSE(fs::exists(snap / "model-00001-of-00003.safetensors"));  // "b" was not read
    CHECK(std::distance(fs::directory_iterator(repo / "blobs"), fs::directory_iterator()) == 1);  // the index's alone
    CHECK(fs::exists(repo / "refs" / "main"));
    const auto before = s.hub.requests().size();
    {
        auto r = reader::open("hf://org/cached", ro);  // the index from the cache, the shards from the Hub
        for (auto& [name, bytes] : read_tensors(r)) CHECK(bytes == tensor_bytes(name, bytes.size()));
    }
    CHECK(s.hub.requests().size() == before + 3);
    for (int i = 1; i <= 3; ++i) CHECK(fs::is_symlink(snap / ("model-0000" + std::to_string(i) + "-of-00003.safetensors")));
    for (auto& b : fs::directory_iterator(repo / "blobs")) CHECK(b.path().filename().string().find(".ringsafe-") == std::string::npos);

    // Now all of it is there: no request at all, the shards read as local files, named by their pinned URLs.
    const auto cached = s.hub.requests().size();
    reader_options plain = s.options();
    auto r = reader::open("hf://org/cached", plain);
    for (auto& sh : r.shards()) {
        CHECK_THAT(sh.spec, Catch::StartsWith("hf://org/cached@" + commit + "/"));
        CHECK_THAT(sh.file, Catch::StartsWith(snap.string()));
        CHECK(sh.inode != 0);
    }
    for (auto& [name, bytes] : read_tensors(r)) CHECK(bytes == tensor_bytes(name, bytes.size()));
    CHECK(s.hub.requests().size() == cached);

    // Offline: what is there reads, what is not is ENOENT naming where it was looked for.
    plain.source.stores.hub.offline = true;
    CHECK(reader::open("hf://org/cached/model-00001-of-00003.safetensors", plain).tensors().size() == 2);
    try {
        reader::open("hf://org/cached/config.json", plain);
        FAIL("opened");
    } catch (const std::system_error& e) {
        CHECK(e.code() == std::errc::no_such_file_or_directory);
        CHECK_THAT(e.what(), Catch::Contains("hf://org/cached/config.json") && Catch::Contains("offline") &&
                                 Catch::Contains((snap / "config.json").string()));
    }
    CHECK(s.hub.requests().size() == cached);
}

namespace {

// Whether the cache holds anything of `repo` (a blob, a snapshot, a ref).
bool anything_cached(const fs::path& cache, const std::string& repo) {
    const fs::path dir = cache / ("models--org--" + repo);
    for (const char* part : {"blobs", "snapshots", "refs"}) {
        std::error_code ec;
        if (fs::exists(dir / part, ec) && !fs::is_empty(dir / part, ec)) return true;
    }
    return false;
}

}  // namespace

TEST_CASE("a CDN that serves other bytes under the same ETag: the load fails naming both hashes, nothing is cached") {
    hub_site s;
    fault_server faults(s.tmp / "faults");
    const built_file good = build_file({{"w", "U8", {300'000}, 300'000}, {"x", "F32", {100}, 400}});
    std::vector<std::byte> other = good.bytes;  // the same header, other tensor bytes
    for (std::size_t k = good.data_start; k < other.size(); ++k) other[k] ^= std::byte{0x5A};
    const std::string blob = sha256_hex(good.bytes);
    const std::string commit = s.hub.add_repo("org/mixed", {{"model.safetensors", good.bytes}});
    write_file(s.hub.file_of("org/mixed", commit, "model.safetensors.other"), other);
    make_world_readable(s.hub.root());
    reader_options ro = s.options();
    int round = 0;
    auto lying = [&] {  // the first two requests honest, every later one the other bytes
        s.hub.control("org/mixed", "cdn", faults.base_url() + "/cdn?file={file}&fault=swap&other={file}.other&skip=2&id=mix" +
                                              std::to_string(++round));
    };
    auto load = [&](const reader_options& o) {
        auto r = reader::open("hf://org/mixed/model.safetensors", o);
        return read_tensors(r);
    };
    lying();
    auto e = expect_error([&] { load(ro); });
    CHECK(e.code() == errc::ObjectChanged);
    CHECK_THAT(e.what(), Catch::Contains("hf://org/mixed@" + commit + "/model.safetensors") && Catch::Contains("sha256") &&
                             Catch::Contains(blob) && Catch::Contains("X-Linked-Etag") && !Catch::Contains("nothing was written"));
    // The opt-out reads what the CDN serves: one tensor of each version (the finding).
    reader_options unchecked = ro;
    unchecked.source.stores.hub.verify = hub_options::verification::never;
    lying();
    const auto mixed = load(unchecked);
    CHECK(mixed.at("w") != tensor_bytes("w", 300'000));
    // With the cache: the same error, and no blob, snapshot or ref.
    reader_options caching = ro;
    caching.source.stores.hub.cache = true;
    for (auto o : {caching, unchecked}) {
        o.source.stores.hub.cache = true;  // the cache checks whatever verify says
        lying();
        e = expect_error([&] { load(o); });
        CHECK(e.code() == errc::ObjectChanged);
        CHECK_THAT(e.what(), Catch::Contains(blob) && Catch::Contains("nothing was written into the Hub cache"));
        CHECK_FALSE(anything_cached(s.cache, "mixed"));
    }
    // The Asio front end checks too.
    lying();
    {
        boost::asio::io_context io;
        auto opened = ringsafe::asio::async_open(io.get_executor(), "hf://org/mixed/model.safetensors", caching, boost::asio::use_future);
        io.run();
        auto r = opened.get();
        auto sel = r.get().all();
        std::vector<std::vector<std::byte>> bufs;
        std::vector<std::span<std::byte>> spans;
        for (auto i : sel.indices()) bufs.emplace_back(r.get().tensors()[i].size());
        for (auto& b : bufs) spans.emplace_back(b);
        io.restart();
        status st;
        auto done = ringsafe::asio::async_read(r, r.get().plan(sel, spans), st, boost::asio::use_future);
        io.run();
        CHECK_THROWS(done.get());
        CHECK(st.code == errc::ObjectChanged);
        CHECK_THAT(st.message, Catch::Contains(blob) && Catch::Contains("nothing was written into the Hub cache"));
    }
    CHECK_FALSE(anything_cached(s.cache, "mixed"));
    // An honest CDN: read, verified and cached.
    s.hub.control("org/mixed", "cdn", faults.base_url() + "/cdn?file={file}&id=honest");
    CHECK(load(caching).at("w") == tensor_bytes("w", 300'000));
    CHECK(read_file(s.cache / "models--org--mixed" / "blobs" / blob) == good.bytes);
}

TEST_CASE("failed answers leave nothing in the cache: an empty 200, a revision too long for a ref") {
    hub_site s;
    const auto data = single_file();
    const std::string commit = s.hub.add_repo("org/empty", {{"model.safetensors", data}});
    reader_options ro = s.options();
    ro.source.stores.hub.cache = true;
    // A 200 with no body and no X-Linked-Size, under the file's sha256.
    s.hub.control("org/empty", "empty", "1");
    auto e = expect_error([&] { reader::open("hf://org/empty/model.safetensors", ro); });
    CHECK(e.code() == errc::ObjectChanged);
    CHECK_THAT(e.what(), Catch::Contains("0 bytes served hash to sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") &&
                             Catch::Contains(sha256_hex(data)));
    CHECK_FALSE(anything_cached(s.cache, "empty"));
    reader_options plain = s.options();
    CHECK(expect_error([&] { reader::open("hf://org/empty/model.safetensors", plain); }).code() == errc::ObjectChanged);
    // The Hub healthy again: the load asks it (nothing stale was cached), and succeeds.
    fs::remove(s.hub.root() / "models" / "org" / "empty" / "empty");
    const auto before = s.hub.requests().size();
    CHECK(read_tensors(*std::make_unique<reader>(reader::open("hf://org/empty/model.safetensors", ro))).at("w") ==
          tensor_bytes("w", 300'000));
    CHECK(s.hub.requests().size() > before);
    CHECK(fs::is_symlink(s.cache / "models--org--empty" / "snapshots" / commit / "model.safetensors"));

    // A 300-character revision: the cache cannot hold its ref; refused before a byte is written.
    s.hub.control("org/longrev", "any_revision", s.hub.add_repo("org/longrev", {{"model.safetensors", data}}));
    const std::string rev(300, 'r');
    e = expect_error([&] { read_tensors(*std::make_unique<reader>(reader::open("hf://org/longrev@" + rev + "/model.safetensors", ro))); });
    CHECK(e.code() == std::errc::filename_too_long);
    CHECK_THAT(e.what(), Catch::Contains("too long") && Catch::Contains((s.cache / "models--org--longrev").string()));
    CHECK_FALSE(anything_cached(s.cache, "longrev"));
    // Read without the cache, it loads.
    CHECK(read_tensors(*std::make_unique<reader>(reader::open("hf://org/longrev@" + rev + "/model.safetensors", plain))).size() == 2);
}

TEST_CASE("a cached blob flipped or planted: verify re-hashes it, a link out of the cache is not followed") {
    hub_site s;
    const auto data = single_file();
    const std::string commit = s.hub.add_repo("org/kept", {{"model.safetensors", data}});
    const std::string blob = sha256_hex(data);
    const fs::path blob_path = s.cache / "models--org--kept" / "blobs" / blob;
    reader_options ro = s.options();
    ro.source.stores.hub.cache = true;
    read_tensors(*std::make_unique<reader>(reader::open("hf://org/kept/model.safetensors", ro)));
    REQUIRE(read_file(blob_path) == data);
    reader_options offline = s.options();
    offline.source.stores.hub.offline = true;
    reader_options verify = offline;
    verify.source.stores.hub.verify = hub_options::verification::always;
    CHECK(reader::open("hf://org/kept/model.safetensors", verify).tensors().size() == 2);  // as named
    // One byte flipped: verify says so, naming the blob and both hashes.
    auto flipped_bytes = data;
    flipped_bytes[data.size() - 10] ^= std::byte{1};
    write_file(blob_path, flipped_bytes);
    auto e = expect_error([&] { reader::open("hf://org/kept/model.safetensors", verify); });
    CHECK(e.code() == errc::ObjectChanged);
    CHECK_THAT(e.what(), Catch::Contains(blob_path.string()) && Catch::Contains(sha256_hex(flipped_bytes)) &&
                             Catch::Contains("not its name " + blob));
    // A symlink at the blob's path, to an outside file of the same size: the cache does not have the file.
    const fs::path outside = s.tmp / "outside.bin";
    write_file(outside, flipped_bytes);
    fs::remove(blob_path);
    fs::create_symlink(outside, blob_path);
    try {
        reader::open("hf://org/kept/model.safetensors", offline);
        FAIL("opened a blob out of the cache");
    } catch (const std::system_error& x) {
        CHECK(x.code() == std::errc::no_such_file_or_directory);
    }
    // Online with the cache: fetched from the Hub, checked, and the blob replaced by a file of its own.
    auto r = reader::open("hf://org/kept/model.safetensors", ro);
    CHECK(r.shards()[0].file.empty());
    CHECK(read_tensors(r).at("w") == tensor_bytes("w", 300'000));
    CHECK_FALSE(fs::is_symlink(blob_path));
    CHECK(read_file(blob_path) == data);
    CHECK(read_file(outside) == flipped_bytes);
    CHECK(reader::open("hf://org/kept@" + commit + "/model.safetensors", verify).tensors().size() == 2);
}

TEST_CASE("the Asio front end opens hf:// URLs: remote ones by their first request, cached ones as local files") {
    hub_site s;
    const std::string commit = s.hub.add_repo("org/asio", sharded_repo());
    reader_options ro = s.options();
    ro.source.http.chunk_size = 64u << 10;  // many requests, each hashed (and cached) as it lands
    // Round 0: read and verified (not cached); 1: verified and written into the cache;
    // 2: everything in the cache (round 1 wrote it).
    for (int round = 0; round < 3; ++round) {
        INFO("round " << round);
        ro.source.stores.hub.cache = round > 0;
        const auto before = s.hub.requests().size();
        boost::asio::io_context io;
        auto opened = ringsafe::asio::async_open(io.get_executor(), "hf://org/asio", ro, boost::asio::use_future);
        io.run();
        auto r = opened.get();
        REQUIRE(r.get().shards().size() == 3);
        for (auto& sh : r.get().shards()) {
            CHECK_THAT(sh.spec, Catch::StartsWith("hf://org/asio@" + commit + "/"));
            CHECK(sh.file.empty() == (round < 2));
        }
        auto sel = r.get().all();
        std::vector<std::vector<std::byte>> bufs;
        std::vector<std::span<std::byte>> spans;
        std::uint64_t total = 0;
        for (auto i : sel.indices()) total += bufs.emplace_back(r.get().tensors()[i].size()).size();
        for (auto& b : bufs) spans.emplace_back(b);
        // Progress counts the caller's tensors, not the requests they were cut into.
        std::uint64_t last = 0;
        std::vector<int> tensor_done(sel.size(), 0);
        ringsafe::asio::read_callbacks cb;
        cb.on_progress = [&](std::uint64_t d, std::uint64_t t) {
            CHECK(t == total);
            CHECK(d >= last);
            CHECK(d <= t);
            last = d;
        };
        cb.on_tensor_done = [&](std::size_t target, const tensor_info&) {
            REQUIRE(target < tensor_done.size());
            ++tensor_done[target];
        };
        io.restart();
        auto done = ringsafe::asio::async_read(r, sel, spans, cb, boost::asio::use_future);
        io.run();
        done.get();
        for (std::size_t k = 0; k < sel.size(); ++k) {
            const auto& t = r.get().tensors()[sel.indices()[k]];
            CHECK(bufs[k] == tensor_bytes(t.name, t.size()));
            CHECK(tensor_done[k] == 1);
        }
        CHECK(last == total);
        if (round == 2) CHECK(s.hub.requests().size() == before);
    }
    CHECK(fs::is_symlink(s.cache / "models--org--asio" / "snapshots" / commit / "model-00003-of-00003.safetensors"));
}
