// s3:// sources against a real S3 store (Ceph radosgw, started by the test):
// SigV4 header auth, presigned URLs, a wrong secret (403), If-Match (412).
// Exits 77 (skipped) when radosgw cannot be started on this machine.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <ctime>

#include "stores/s3_object.hpp"
#include "http/url.hpp"
#include "radosgw_cluster.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/http.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"
#include "store_servers.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

// One cluster for the whole program (it takes ~15 s to start), with
// bucket "models" holding "dir/model file.bin" (= data()).
struct store {
    temp_dir tmp;
    radosgw_cluster cluster{tmp / "ceph"};
    std::vector<std::byte> data = std::vector<std::byte>((5u << 20) + 99);
    store() {
        fill_pattern(data, 42);
        write_file(tmp / "obj.bin", data);
        REQUIRE(cluster.create_bucket("models") == 200);
        REQUIRE(cluster.put_object("models", "dir/model%20file.bin", tmp / "obj.bin") == 200);
    }
};

store& the_store() {
    static store s;
    return s;
}

s3_options credentials() {
    s3_options o;
    o.access_key_id = radosgw_cluster::access_key;
    o.secret_access_key = radosgw_cluster::secret_key;
    o.endpoint = the_store().cluster.endpoint();
    return o;
}

// The stores' test options in 1 MiB requests, signed for the cluster.
source_options options() {
    source_options o = store_test_options();
    o.http.chunk_size = 1 << 20;
    o.stores.s3 = credentials();
    return o;
}

}  // namespace

TEST_CASE("s3:// with SigV4 header auth reads the whole object") {
    auto& st = the_store();
    auto src = open_url("s3://models/dir/model file.bin", options());
    REQUIRE(src->size() == st.data.size());
    CHECK(src->name() == "s3://models/dir/model file.bin");
    std::vector<std::byte> all(st.data.size());
    src->read_exact(0, all);
    CHECK(all == st.data);
}

TEST_CASE("s3:// takes credentials and endpoint from the AWS_* environment") {
    auto& st = the_store();
    ::setenv("AWS_ACCESS_KEY_ID", radosgw_cluster::access_key, 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", radosgw_cluster::secret_key, 1);
    ::setenv("AWS_REGION", "us-east-1", 1);
    ::setenv("AWS_ENDPOINT_URL", st.cluster.endpoint().c_str(), 1);
    auto src = open_url("s3://models/dir/model file.bin");
    std::vector<std::byte> part(1000);
    src->read_exact(123456, part);
    CHECK(std::equal(part.begin(), part.end(), st.data.begin() + 123456));
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
    // Without credentials the request is anonymous, which this bucket refuses.
    try {
        open_url("s3://models/dir/model file.bin");
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::HttpError);
        CHECK(std::string(e.what()).find("HTTP 403") != std::string::npos);
    }
    ::unsetenv("AWS_ENDPOINT_URL");
    ::unsetenv("AWS_REGION");
}

TEST_CASE("a wrong secret is a 403 naming the URL") {
    source_options o = options();
    o.stores.s3.secret_access_key = "not-the-secret";
    try {
        open_url("s3://models/dir/model file.bin", o);
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::HttpError);
        CHECK(std::string(e.what()).find("HTTP 403") != std::string::npos);
        CHECK(std::string(e.what()).find("/models/dir/model%20file.bin") != std::string::npos);
    }
}

TEST_CASE("a presigned URL works as a plain http URL; a tampered one is refused") {
    auto& st = the_store();
    std::string presigned = presign_s3_url("s3://models/dir/model file.bin", credentials(), std::chrono::seconds(600));
    http_options plain;  // no credentials at all
    auto src = open_url(presigned, plain);
    std::vector<std::byte> all(st.data.size());
    src->read_exact(0, all);
    CHECK(all == st.data);
    std::string tampered = presigned;
    tampered.back() = tampered.back() == '0' ? '1' : '0';
    try {
        open_url(tampered, plain);
        FAIL("no error");
    } catch (const error& e) {
        CHECK(std::string(e.what()).find("HTTP 403") != std::string::npos);
    }
}

TEST_CASE("an object overwritten during a read fails If-Match (412) -> ObjectChanged") {
    auto& st = the_store();
    write_file(st.tmp / "v1.bin", std::span(st.data.data(), 3u << 20));
    REQUIRE(st.cluster.put_object("models", "changing.bin", st.tmp / "v1.bin") == 200);
    auto src = open_url("s3://models/changing.bin", options());
    auto v2 = st.data;
    v2[0] ^= std::byte{1};
    v2.resize(3u << 20);
    write_file(st.tmp / "v2.bin", v2);
    REQUIRE(st.cluster.put_object("models", "changing.bin", st.tmp / "v2.bin") == 200);
    std::vector<std::byte> buf(1 << 20);
    try {
        src->read_exact(1 << 20, buf);
        FAIL("no error");
    } catch (const error& e) {
        CHECK(e.code() == errc::ObjectChanged);
        CHECK(std::string(e.what()).find("HTTP 412") != std::string::npos);
    }
}

TEST_CASE("ringsafe cp from s3:// (credentials from the environment) writes a byte-exact file") {
    auto& st = the_store();
    std::vector<std::pair<std::string, std::vector<std::byte>>> tensors;
    {
        writer_options wo;
        wo.sync = wo.sync_dir = false;
        writer w((st.tmp / "cp_src.safetensors").string(), wo);
        for (int i = 0; i < 9; ++i) {
            std::uint64_t n = i % 2 ? (3u << 20) / 2 + i : 777 * i;
            tensors.emplace_back("t" + std::to_string(i), std::vector<std::byte>(n));
            fill_pattern(tensors.back().second, 300 + i);
            w.add(tensors.back().first, dtype::U8, {n}, tensors.back().second);
        }
        w.finish();
    }
    REQUIRE(st.cluster.put_object("models", "cp/src.safetensors", st.tmp / "cp_src.safetensors") == 200);
    ::setenv("AWS_ACCESS_KEY_ID", radosgw_cluster::access_key, 1);
    ::setenv("AWS_SECRET_ACCESS_KEY", radosgw_cluster::secret_key, 1);
    ::setenv("AWS_ENDPOINT_URL", st.cluster.endpoint().c_str(), 1);
    auto out = st.tmp / "cp_out.safetensors";
    auto r = run_command(cli_path() + " cp s3://models/cp/src.safetensors '" + out.string() +
                         "' --buffer 1M --buffers 3 --no-sync 2>&1");
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
    ::unsetenv("AWS_ENDPOINT_URL");
    INFO(r.out);
    REQUIRE(r.status == 0);
    auto rd = reader::open(out.string());
    REQUIRE(rd.tensors().size() == tensors.size());
    std::vector<std::byte> all(rd.all().bytes());
    rd.read_packed(rd.all(), all, 1);
    std::size_t at = 0;
    for (auto& [name, bytes] : tensors) {
        CHECK(rd.tensors()[*rd.index_of(name)].size() == bytes.size());
        CHECK(std::equal(bytes.begin(), bytes.end(), all.begin() + at));
        at += bytes.size();
    }
}
