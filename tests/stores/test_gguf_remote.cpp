// GGUF over the network: a header of a 150k-token vocabulary and 300k merges
// (~9 MB) read in at most 3 requests and at most 1.5x its bytes, counted by
// each server's own log, over http:// (nginx, blocking and async), hf:// (the
// Hub stand-in's CDN) and az:// (the Azure Blob stand-in); the corpus's split
// set opened from one part's URL, a missing part named by its URL.
#include <catch2/catch.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>

#include "gguf_cases.hpp"
#include "gguf_files.hpp"
#include "http_harness.hpp"
#include "ringsafe/asio.hpp"
#include "ringsafe/reader.hpp"
#include "store_servers.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

// The big header's file: made once, ~62 MB (the header, then zeros for the data).
struct big_file {
    std::vector<gguf::metadata_entry> meta = llama_metadata(150000, 300000);
    std::vector<gguf::tensor_record> recs = llama_tensors(2, 256, 150000);
    std::string header = gguf::serialize(meta, recs);
    std::uint64_t size = 0;
    big_file() {
        const gguf::header h = gguf::parse(std::as_bytes(std::span(header.data(), header.size())), 1ull << 40);
        size = h.data_offset + h.data_size;
    }
    // Writes it to `path` (sparse past the header).
    void write(const fs::path& path) const { write_gguf_header_only(path, meta, recs); }
    std::vector<std::byte> bytes() const {
        std::vector<std::byte> out(size);
        std::memcpy(out.data(), header.data(), header.size());
        return out;
    }
};

const big_file& big() {
    static const big_file b;
    return b;
}

// Requests for `name` in an nginx access log and the body bytes they sent.
struct logged {
    std::size_t requests = 0;
    std::uint64_t bytes = 0;
};
logged nginx_requests(const std::vector<std::string>& log, const std::string& name) {
    logged out;
    for (const std::string& l : log) {
        if (l.find(name) == std::string::npos) continue;
        ++out.requests;
        out.bytes += std::stoull(l.substr(l.rfind(' ') + 1));
    }
    return out;
}

// The checks of the target: the header's records as a local open gives them,
// in at most 3 requests and 1.5x the header's bytes.
void check_big_reader(reader& r, const logged& l) {
    INFO(l.requests << " requests, " << l.bytes << " bytes for a " << big().header.size() << "-byte header");
    CHECK(r.tensors().size() == big().recs.size());
    CHECK(r.gguf()->find_key("tokenizer.ggml.merges")->count == 300000);
    CHECK(r.shards()[0].data_start == big().header.size());
    CHECK(l.requests >= 2);
    CHECK(l.requests <= 3);
    CHECK(l.bytes >= big().header.size());
    CHECK(static_cast<double>(l.bytes) <= 1.5 * static_cast<double>(big().header.size()));
}

std::map<std::string, std::string> hashes(reader& r) {
    std::map<std::string, std::string> out;
    for (auto& [name, bytes] : read_tensors(r)) out[name] = sha256_hex(bytes);
    return out;
}

// The corpus's split parts, by split.no.
std::vector<const gguf_case*> split_cases(const std::vector<gguf_case>& all) {
    std::vector<const gguf_case*> out(3);
    for (auto& c : all)
        if (c.split) out.at(c.split->no) = &c;
    return out;
}

void check_split(reader& r, const std::vector<const gguf_case*>& parts) {
    REQUIRE(r.shards().size() == 3);
    const auto got = hashes(r);
    for (const gguf_case* c : parts)
        for (auto& t : c->tensors) CHECK(got.at(t.name) == t.sha256);
}

}  // namespace

TEST_CASE("http://: a 150k-token GGUF header in at most 3 requests and 1.5x its bytes (nginx's log)") {
    temp_dir t;
    fs::create_directories(t / "www");
    big().write(t / "www" / "big.gguf");
    nginx_server ng(t / "nginx", {t / "www", "", "", nullptr, 1, 0});
    const std::string url = ng.base_url() + "/big.gguf";
    {
        reader r = reader::open(url);
        check_big_reader(r, nginx_requests(ng.access_log(2), "/big.gguf"));
    }
    // The async open, on the caller's io_context, the same.
    const std::size_t before = ng.access_log().size();
    boost::asio::io_context io;
    status st;
    asio::async_reader opened;
    asio::async_open(io.get_executor(), url, {}, st, [&](asio::error_code, asio::async_reader r) { opened = std::move(r); });
    io.run();
    REQUIRE(st.ok());
    auto log = ng.access_log(before + 2);
    log.erase(log.begin(), log.begin() + static_cast<std::ptrdiff_t>(before));
    check_big_reader(opened.get(), nginx_requests(log, "/big.gguf"));
}

TEST_CASE("http://: the corpus's split set from one part's URL; a missing part named by its URL") {
    temp_dir t;
    const auto cases = load_gguf_cases(gguf_conformance_dir() / "valid");
    const auto parts = split_cases(cases);
    fs::create_directories(t / "www" / "set");
    for (const gguf_case* c : parts) fs::copy_file(c->path, t / "www" / "set" / c->file);
    nginx_server ng(t / "nginx", {t / "www", "", "", nullptr, 1, 0});
    reader r = reader::open(ng.base_url() + "/set/" + parts[1]->file);
    check_split(r, parts);
    CHECK(r.shards()[0].spec == ng.base_url() + "/set/" + parts[0]->file);
    fs::remove(t / "www" / "set" / parts[2]->file);
    const error e = expect_error([&] { reader::open(ng.base_url() + "/set/" + parts[0]->file); });
    CHECK(e.code() == errc::HttpError);
    CHECK_THAT(e.what(), Catch::Contains(ng.base_url() + "/set/" + parts[2]->file) && Catch::Contains("404"));
}

TEST_CASE("hf://: a 150k-token GGUF header in at most 3 CDN requests and 1.5x its bytes; a split set") {
    temp_dir t;
    for (const char* v : {"HF_TOKEN", "HF_HUB_CACHE", "HF_HUB_OFFLINE", "HF_ENDPOINT"}) ::unsetenv(v);
    scoped_env home("HF_HOME", (t / "hf_home").string());
    hub_standin hub(t / "hub");
    std::map<std::string, std::vector<std::byte>> files{{"big.gguf", big().bytes()}};
    const auto cases = load_gguf_cases(gguf_conformance_dir() / "valid");
    const auto parts = split_cases(cases);
    for (const gguf_case* c : parts) files[c->file] = read_file(c->path);
    const std::string commit = hub.add_repo("acme/gguf", files);
    reader_options ro;
    ro.source.stores.hub.endpoint = hub.endpoint();
    ro.source.stores.hub.cache_dir = (t / "cache").string();
    {
        reader r = reader::open("hf://acme/gguf/big.gguf", ro);
        check_big_reader(r, nginx_requests(hub.cdn_log(), "/big.gguf"));
    }
    reader s = reader::open("hf://acme/gguf/" + parts[2]->file, ro);
    check_split(s, parts);
    CHECK(s.shards()[0].spec == "hf://acme/gguf@" + commit + "/" + parts[0]->file);  // every part at the commit read
}

TEST_CASE("az://: a 150k-token GGUF header in at most 3 requests and 1.5x its bytes (the stand-in's log)") {
    temp_dir t;
    fs::create_directories(t / "data" / "models");
    big().write(t / "data" / "models" / "big.gguf");
    standin s = azure_standin(t / "data", {}, t.path());
    scoped_env e("AZURE_STORAGE_CONNECTION_STRING",
                 "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + std::string(azure_dev_key) +
                     ";BlobEndpoint=" + s.base_url() + "/devstoreaccount1;");
    reader r = reader::open("az://models/big.gguf");
    logged l;
    const std::regex range(R"(bytes=(\d+)-(\d+))");
    for (const std::string& line : s.log()) {
        const auto j = boost::json::parse(line).as_object();
        if (j.at("method").as_string() != "GET" || std::string(j.at("path").as_string()).find("big.gguf") == std::string::npos)
            continue;
        ++l.requests;
        std::string spec(j.at("x_ms_range").as_string());
        if (spec.empty()) spec = std::string(j.at("range").as_string());
        std::smatch m;
        REQUIRE(std::regex_search(spec, m, range));
        l.bytes += std::min<std::uint64_t>(std::stoull(m[2]), big().size - 1) - std::stoull(m[1]) + 1;
    }
    check_big_reader(r, l);
}
