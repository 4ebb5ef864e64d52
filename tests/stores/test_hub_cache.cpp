// The Hub cache (internal: stores/hub/hub_cache.hpp, blob_digest.hpp, hub_tee.hpp):
// lookups in huggingface_hub's layout (try_to_load_from_cache's rules, no link
// out of the cache followed), and files written into it as they are read:
// never at their place before every byte is there and hashes to the blob's
// name, then blob, relative snapshot link and ref as huggingface_hub writes
// them; what is there already trusted only once its bytes hash to its name.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "http/fetch_pieces.hpp"
#include "ringsafe/http.hpp"
#include "stores/hub/blob_digest.hpp"
#include "stores/digest.hpp"
#include "stores/hub/hub_cache.hpp"
#include "stores/hub/hub_path.hpp"
#include "stores/hub/hub_tee.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::stores;
using namespace ringsafe::test;
namespace fs = std::filesystem;

namespace {

const std::string c1 = "1111111111111111111111111111111111111111";
const std::string c2 = "2222222222222222222222222222222222222222";

// A file as hf_hub_download leaves it: blobs/ETAG and snapshots/COMMIT/PATH -> ../../blobs/ETAG.
void put(const fs::path& repo, const std::string& commit, const std::string& path, const std::string& etag,
         const std::string& bytes) {
    fs::create_directories(repo / "blobs");
    write_file(repo / "blobs" / etag, bytes);
    const fs::path link = repo / "snapshots" / commit / path;
    fs::create_directories(link.parent_path());
    fs::create_symlink(fs::relative(repo / "blobs" / etag, link.parent_path()), link);
}

void ref(const fs::path& repo, const std::string& rev, const std::string& text) {
    fs::create_directories((repo / "refs" / rev).parent_path());
    write_file(repo / "refs" / rev, text);
}

std::vector<std::string> names_in(const fs::path& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
    return out;
}

std::span<const std::byte> bytes_of(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

// The blob name of `data` (its sha256), as the Hub's X-Linked-Etag gives it.
std::string sha_of(std::span<const std::byte> data) {
    return sha256_hex(std::string_view(reinterpret_cast<const char*>(data.data()), data.size()));
}
std::string sha_of(const std::string& s) { return sha256_hex(s); }

const std::string empty_sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const std::string hello_git = "ce013625030ba8dba906f756967f9e9ca394464a";  // git hash-object of "hello\n"

}  // namespace

TEST_CASE("a cached file is found through refs/REVISION, or by its commit; the index before the single file") {
    temp_dir cache;
    const fs::path repo = cache / "models--org--name";
    put(repo, c1, "model.safetensors", "e1", "one");
    put(repo, c1, "sub/dir/x.json", "e2", "{}");
    put(repo, c2, "model.safetensors", "e3", "two");
    put(repo, c2, "model.safetensors.index.json", "e4", "{\"weight_map\":{}}");
    ref(repo, "main", c1);
    ref(repo, "refs/pr/3", c2 + "\n");  // a trailing newline is tolerated

    auto find = [&](const char* url) { return find_in_hub_cache(cache.path().string(), parse_hub_url(url)); };
    auto hit = find("hf://org/name/model.safetensors");
    REQUIRE(hit);
    CHECK(hit->commit == c1);
    CHECK(hit->path == "model.safetensors");
    CHECK(hit->local == (repo / "snapshots" / c1 / "model.safetensors").string());
    CHECK(find("hf://org/name@main/sub/dir/x.json"));
    CHECK(find(("hf://org/name@" + c2 + "/model.safetensors").c_str())->commit == c2);
    // No path: the index when the snapshot has it, else the single file.
    CHECK(find("hf://org/name")->path == "model.safetensors");
    auto pr = find("hf://org/name@refs/pr/3");
    REQUIRE(pr);
    CHECK(pr->commit == c2);
    CHECK(pr->path == "model.safetensors.index.json");
    // Not there: another file, a revision without a ref, a commit without a snapshot, another repo type.
    CHECK_FALSE(find("hf://org/name/other.safetensors"));
    CHECK_FALSE(find("hf://org/name@v2/model.safetensors"));
    CHECK_FALSE(find(("hf://org/name@" + std::string(40, 'a') + "/model.safetensors").c_str()));
    CHECK_FALSE(find("hf://datasets/org/name/model.safetensors"));
    // A link whose blob is gone, and a ref that is not a commit id, find nothing.
    fs::remove(repo / "blobs" / "e2");
    CHECK_FALSE(find("hf://org/name/sub/dir/x.json"));
    ref(repo, "broken", "not-a-commit");
    CHECK_FALSE(find("hf://org/name@broken/model.safetensors"));
    CHECK(hub_cache_place(cache.path().string(), parse_hub_url("hf://org/name@v2/m")) == (repo / "refs" / "v2").string());
    CHECK(hit->blob == fs::canonical(repo / "blobs" / "e1").string());
    CHECK(hit->blob_name == "e1");
}

TEST_CASE("a cached link that leads out of the cache finds nothing: a planted blob, a link elsewhere") {
    temp_dir cache, outside;
    const fs::path repo = cache / "models--org--name";
    write_file(outside / "secret", std::string("same size"));
    put(repo, c1, "model.safetensors", "e1", "same size");
    ref(repo, "main", c1);
    auto find = [&](const char* url) { return find_in_hub_cache(cache.path().string(), parse_hub_url(url)); };
    REQUIRE(find("hf://org/name/model.safetensors"));
    // The blob replaced by a symlink to a file outside, of the same size.
    fs::remove(repo / "blobs" / "e1");
    fs::create_symlink(outside / "secret", repo / "blobs" / "e1");
    CHECK_FALSE(find("hf://org/name/model.safetensors"));
    // The snapshot's link itself pointing outside, or to a blob of another repo.
    put(repo, c1, "a.bin", "e2", "x");
    fs::remove(repo / "snapshots" / c1 / "a.bin");
    fs::create_symlink(outside / "secret", repo / "snapshots" / c1 / "a.bin");
    CHECK_FALSE(find("hf://org/name/a.bin"));
    put(cache / "models--org--other", c2, "b.bin", "e3", "y");
    fs::create_symlink("../../../../models--org--other/blobs/e3", repo / "snapshots" / c1 / "b.bin");
    CHECK_FALSE(find("hf://org/name/b.bin"));
    // A file copied in (a cache without symlinks) is found, with no blob to check it by.
    write_file(repo / "snapshots" / c1 / "copied.bin", std::string("z"));
    auto copied = find("hf://org/name/copied.bin");
    REQUIRE(copied);
    CHECK(copied->blob.empty());
    CHECK_THAT(kind_of([&] { verify_cached_file(*copied, "hf://org/name/copied.bin"); }),
               Catch::StartsWith("InvalidArgument") && Catch::Contains("links to no blob"));
}

TEST_CASE("a cached blob is hashed against its name when asked: a flipped byte is ObjectChanged naming both hashes") {
    temp_dir cache;
    const fs::path repo = cache / "models--org--name";
    std::vector<std::byte> data(70'000);
    fill_pattern(data, 8);
    const std::string name = sha_of(data);
    fs::create_directories(repo / "blobs");
    write_file(repo / "blobs" / name, data);
    fs::create_directories(repo / "snapshots" / c1);
    fs::create_symlink("../../blobs/" + name, repo / "snapshots" / c1 / "m.safetensors");
    const std::string url = "hf://org/name@" + c1 + "/m.safetensors";
    auto hit = find_in_hub_cache(cache.path().string(), parse_hub_url(url));
    REQUIRE(hit);
    verify_cached_file(*hit, url);  // as named
    data[12'345] ^= std::byte{1};
    write_file(repo / "blobs" / name, data);
    const std::string m = kind_of([&] { verify_cached_file(*hit, url); });
    CHECK_THAT(m, Catch::StartsWith("ObjectChanged: " + url) && Catch::Contains(sha_of(data)) && Catch::Contains(name) &&
                      Catch::Contains("remove it"));
}

TEST_CASE("blob_digest: the prefix hashed as it grows, out-of-order bytes left, the rest from the file, git's blob id") {
    std::vector<std::byte> data(1'000'003);
    fill_pattern(data, 2);
    auto d = blob_digest::for_blob(sha_of(data), data.size());
    REQUIRE(d);
    CHECK_FALSE(d->add(500'000, std::span(data).subspan(500'000, 1000)));  // past the prefix: left
    CHECK(d->hashed() == 0);
    CHECK(d->add(0, std::span(data).first(400'000)));
    CHECK(d->add(100, std::span(data).subspan(100, 350'000)));  // overlapping: its new part only
    CHECK(d->hashed() == 400'000);
    CHECK_FALSE(d->complete());
    temp_dir t;
    write_file(t / "f", data);
    const int fd = ::open((t / "f").c_str(), O_RDONLY);
    d->add_from_file(fd, (t / "f").string());
    ::close(fd);
    CHECK(d->complete());
    CHECK(d->matches());
    CHECK(d->hex() == sha_of(data));
    // Names of no known hash get no digest; git's blob id of a small file; the empty file.
    CHECK_FALSE(blob_digest::for_blob("abc123", 3));
    CHECK_FALSE(blob_digest::for_blob(std::string(64, 'A'), 3));  // upper case is not the Hub's
    auto g = blob_digest::for_blob(hello_git, 6);
    REQUIRE(g);
    CHECK(g->kind() == blob_hash::git_sha1);
    g->add(0, bytes_of("hello\n"));
    CHECK(g->matches());
    auto e = blob_digest::for_blob(empty_sha, 0);
    CHECK((e && e->complete() && e->matches()));
    CHECK_FALSE(blob_digest::for_blob(sha_of(data), 0)->matches());
}

TEST_CASE("a file written into the cache appears only once every byte has landed, as huggingface_hub lays it out") {
    temp_dir cache;
    const hub_path p = parse_hub_url("hf://org/name");
    const fs::path repo = cache / "models--org--name";
    std::vector<std::byte> data(100'000);
    fill_pattern(data, 3);
    const std::string blob = sha_of(data);
    auto e = hub_cache_entry::open(cache.path().string(), p, "model.safetensors", "main", c1, blob, data.size());
    REQUIRE(e);
    // Out of order, overlapping, the last byte missing until the end.
    e->write(50'000, std::span(data).subspan(50'000, 49'999));
    e->write(0, std::span(data).subspan(0, 60'000));
    CHECK_FALSE(e->published());
    CHECK_FALSE(fs::exists(repo / "blobs" / blob));
    CHECK_FALSE(fs::exists(repo / "snapshots"));
    CHECK_FALSE(fs::exists(repo / "refs"));
    for (auto& n : names_in(repo / "blobs")) CHECK(n.find(blob) == std::string::npos);  // no half-written file anywhere
    // A second source of the same file shares the entry: its bytes complete it.
    auto again = hub_cache_entry::open(cache.path().string(), p, "model.safetensors", "main", c1, blob, data.size());
    CHECK(again == e);
    again->write(99'999, std::span(data).subspan(99'999, 1));
    CHECK(e->published());
    CHECK(read_file(repo / "blobs" / blob) == data);
    CHECK(e->digest()->matches());
    const fs::path link = repo / "snapshots" / c1 / "model.safetensors";
    REQUIRE(fs::is_symlink(link));
    CHECK(fs::read_symlink(link) == "../../blobs/" + blob);
    CHECK(read_file(link) == data);
    const auto r = read_file(repo / "refs" / "main");
    CHECK(std::string(reinterpret_cast<const char*>(r.data()), r.size()) == c1);
    CHECK(fs::exists(cache / "CACHEDIR.TAG"));
    // Found from now on; and a second entry for it has nothing to write.
    CHECK(find_in_hub_cache(cache.path().string(), parse_hub_url("hf://org/name/model.safetensors")));
    e.reset();
    again.reset();
    CHECK_FALSE(hub_cache_entry::open(cache.path().string(), p, "model.safetensors", "main", c1, blob, data.size()));
}

TEST_CASE("bytes that hash to another name are never published; every byte counts, in any order") {
    temp_dir cache;
    const hub_path p = parse_hub_url("hf://org/name");
    const fs::path repo = cache / "models--org--name";
    std::vector<std::byte> data(100'000), other(100'000);
    fill_pattern(data, 3);
    fill_pattern(other, 4);
    // Half of one version, half of another (a CDN that changed the bytes under one ETag).
    auto e = hub_cache_entry::open(cache.path().string(), p, "model.safetensors", "main", c1, sha_of(data), data.size());
    REQUIRE(e);
    e->write(50'000, std::span(other).subspan(50'000));  // after a gap: hashed from the file at the end
    e->write(0, std::span(data).first(50'000));
    CHECK_FALSE(e->published());
    CHECK(e->digest()->complete());
    CHECK_FALSE(e->digest()->matches());
    CHECK(e->digest()->hex() != sha_of(data));
    CHECK(names_in(repo / "blobs").empty());
    CHECK_FALSE(fs::exists(repo / "snapshots"));
    CHECK_FALSE(fs::exists(repo / "refs"));
    // A later load starts afresh (the rejected entry is not shared), and the true bytes are published.
    auto again = hub_cache_entry::open(cache.path().string(), p, "model.safetensors", "main", c1, sha_of(data), data.size());
    REQUIRE(again);
    CHECK(again != e);
    again->write(50'000, std::span(data).subspan(50'000));
    again->write(0, std::span(data).first(50'000));
    CHECK(again->published());
    CHECK(read_file(repo / "snapshots" / c1 / "model.safetensors") == data);
    // A name that is no hash is refused before anything is written.
    CHECK_THAT(kind_of([&] { hub_cache_entry::open(cache.path().string(), p, "x.bin", "main", c1, "abc123", 3); }),
               Catch::StartsWith("InvalidArgument") && Catch::Contains("neither a sha256 nor a git blob id"));
}

TEST_CASE("a revision too long for a ref file is refused before anything is published") {
    temp_dir cache;
    const hub_path p = parse_hub_url("hf://org/name");
    const std::string text = "0123456789", blob = sha_of(text);
    const std::string revision(300, 'r');
    const std::string m = kind_of([&] { hub_cache_entry::open(cache.path().string(), p, "m.bin", revision, c1, blob, text.size()); });
    CHECK_THAT(m, Catch::Contains("too long") && Catch::Contains("refs"));
    CHECK_FALSE(fs::exists(cache / "models--org--name" / "blobs" / blob));
    CHECK_FALSE(fs::exists(cache / "models--org--name" / "snapshots"));
    // A revision whose ref fits, but whose temporary would not (".NAME.ringsafe-XXXXXX"), is refused too.
    CHECK_THAT(kind_of([&] { hub_cache_entry::open(cache.path().string(), p, "m.bin", std::string(250, 'r'), c1, blob, text.size()); }),
               Catch::Contains("too long"));
}

TEST_CASE("a file read in part is never published; a nested path links back up its folders; a known blob is linked at once") {
    temp_dir cache;
    const hub_path p = parse_hub_url("hf://datasets/org/ds");
    const fs::path repo = cache / "datasets--org--ds";
    const std::string text = "0123456789", blob1 = sha_of(text);
    {
        auto e = hub_cache_entry::open(cache.path().string(), p, "a/b/c.bin", c2, c2, blob1, text.size());
        REQUIRE(e);
        e->write(0, bytes_of(text.substr(0, 9)));
    }  // the last source goes: the temporary with it
    CHECK(names_in(repo / "blobs").empty());
    CHECK_FALSE(fs::exists(repo / "snapshots"));

    auto e = hub_cache_entry::open(cache.path().string(), p, "a/b/c.bin", c2, c2, blob1, text.size());
    e->write(0, bytes_of(text));
    CHECK(fs::read_symlink(repo / "snapshots" / c2 / "a/b/c.bin") == "../../../../blobs/" + blob1);
    CHECK(read_file(repo / "snapshots" / c2 / "a/b/c.bin").size() == text.size());
    CHECK_FALSE(fs::exists(repo / "refs"));  // the revision asked for was the commit: no ref

    // The same blob under another commit and name: linked without writing anything (its bytes hash to it).
    CHECK_FALSE(hub_cache_entry::open(cache.path().string(), p, "d.bin", "v1", c1, blob1, text.size()));
    CHECK(fs::read_symlink(repo / "snapshots" / c1 / "d.bin") == "../../blobs/" + blob1);
    const auto r = read_file(repo / "refs" / "v1");
    CHECK(std::string(reinterpret_cast<const char*>(r.data()), r.size()) == c1);

    // An empty file is complete at once: published when "" is its name, never else.
    auto empty = hub_cache_entry::open(cache.path().string(), p, "empty.txt", c1, c1, empty_sha, 0);
    REQUIRE(empty);
    CHECK(empty->published());
    CHECK(fs::file_size(repo / "snapshots" / c1 / "empty.txt") == 0);
    auto lie = hub_cache_entry::open(cache.path().string(), p, "lie.bin", "v2", c2, sha_of(std::string("not empty")), 0);
    REQUIRE(lie);
    CHECK_FALSE(lie->published());
    CHECK_FALSE(fs::exists(repo / "snapshots" / c2 / "lie.bin"));
    CHECK_FALSE(fs::exists(repo / "refs" / "v2"));
    // A small file named by git's blob id.
    auto small = hub_cache_entry::open(cache.path().string(), p, "hello.txt", c1, c1, hello_git, 6);
    REQUIRE(small);
    small->write(0, bytes_of("hello\n"));
    CHECK(small->published());
}

TEST_CASE("a blob already there is trusted only when it hashes to its name, never a symlink") {
    temp_dir cache, outside;
    const hub_path p = parse_hub_url("hf://org/kept");
    const fs::path repo = cache / "models--org--kept";
    const std::string text = "the true bytes", blob = sha_of(text);
    const std::string flipped = "the true bytez";  // the same size, one byte off
    fs::create_directories(repo / "blobs");
    write_file(repo / "blobs" / blob, flipped);
    auto e = hub_cache_entry::open(cache.path().string(), p, "a.bin", "main", c1, blob, text.size());
    REQUIRE(e);  // not linked on its size alone: written again
    CHECK_FALSE(fs::exists(repo / "snapshots" / c1 / "a.bin"));
    e->write(0, bytes_of(text));
    REQUIRE(e->published());
    const auto got = read_file(repo / "snapshots" / c1 / "a.bin");
    CHECK(std::string(reinterpret_cast<const char*>(got.data()), got.size()) == text);
    e.reset();
    // A symlink at the blob's path, to an outside file of the same size: never linked, the outside file untouched.
    fs::remove(repo / "blobs" / blob);
    write_file(outside / "planted", text);  // even with the very bytes
    fs::create_symlink(outside / "planted", repo / "blobs" / blob);
    auto e2 = hub_cache_entry::open(cache.path().string(), p, "b.bin", "main", c1, blob, text.size());
    REQUIRE(e2);
    CHECK_FALSE(fs::is_symlink(repo / "blobs" / blob));
    e2->write(0, bytes_of(text));
    CHECK(e2->published());
    CHECK(fs::is_regular_file(fs::symlink_status(repo / "blobs" / blob)));
    CHECK(fs::exists(outside / "planted"));
    // A snapshot link that led elsewhere is replaced by the link to the blob.
    fs::create_directories(repo / "snapshots" / c2);
    fs::create_symlink(outside / "planted", repo / "snapshots" / c2 / "c.bin");
    CHECK_FALSE(hub_cache_entry::open(cache.path().string(), p, "c.bin", c2, c2, blob, text.size()));
    CHECK(fs::read_symlink(repo / "snapshots" / c2 / "c.bin") == "../../blobs/" + blob);
}

TEST_CASE("an execute()'s ops go into the cache as each completes; what a failed read left is never published") {
    temp_dir cache;
    const hub_path p = parse_hub_url("hf://org/tee");
    std::vector<std::byte> data(200'000);
    fill_pattern(data, 9);
    std::vector<std::byte> got(data.size());
    std::memcpy(got.data(), data.data(), got.size());
    const std::vector<read_op> ops = {{0, 120'000, got.data(), 0}, {120'000, 80'000, got.data() + 120'000, 1}};
    {
        auto e = hub_cache_entry::open(cache.path().string(), p, "m.bin", "main", c1, sha_of(data), data.size());
        REQUIRE(e);
        hub_tee tee(e, e->digest(), ops);
        tee.landed(0, 100'000);
        tee.landed(0, 20'000);  // op 0 complete: written by the tee's thread
        tee.landed(1, 79'999);  // op 1 one byte short: left to finish()
        tee.finish();
        CHECK(e->published());
        CHECK(e->digest()->matches());
        CHECK(read_file(cache / "models--org--tee" / "snapshots" / c1 / "m.bin") == data);
    }
    std::vector<std::byte> data2(data.size());
    fill_pattern(data2, 10);
    std::memcpy(got.data(), data2.data(), got.size());
    {
        auto e = hub_cache_entry::open(cache.path().string(), p, "n.bin", "main", c2, sha_of(data2), data.size());
        REQUIRE(e);
        {
            hub_tee tee(e, e->digest(), ops);
            tee.landed(0, 120'000);
        }  // the read failed: no finish()
        CHECK_FALSE(e->published());
    }
    CHECK_FALSE(fs::exists(cache / "models--org--tee" / "blobs" / sha_of(data2)));
    CHECK_FALSE(fs::exists(cache / "models--org--tee" / "snapshots" / c2));
}

TEST_CASE("a read's pieces are hashed as their bytes land, the prefix within a piece still landing too") {
    // Three pieces of 4 MiB landing out of order, each from its start: what continues the
    // prefix is hashed at once (no second pass), what comes after a gap waits for it.
    constexpr std::uint64_t mib = 1u << 20, third = 4 * mib;
    std::vector<std::byte> data(3 * third);
    fill_pattern(data, 12);
    const std::vector<read_op> pieces = {{0, third, data.data(), 0},
                                         {third, third, data.data() + third, 0},
                                         {2 * third, third, data.data() + 2 * third, 0}};
    auto d = blob_digest::for_blob(sha_of(data), data.size());
    hub_tee tee(nullptr, d, pieces);
    tee.landed(2, third);     // the last piece first: after a gap
    tee.landed(1, 3 * mib);   // most of the middle one
    CHECK(d->hashed() == 0);
    tee.landed(0, 2 * mib + 1);  // half of the first: hashed while the rest of it lands
    CHECK(eventually([&] { return d->hashed() == 2 * mib + 1; }, std::chrono::seconds(10)));
    tee.landed(0, third - (2 * mib + 1));  // the first whole: into the middle one as far as it landed
    CHECK(eventually([&] { return d->hashed() == third + 3 * mib; }, std::chrono::seconds(10)));
    tee.landed(1, mib);
    tee.finish();
    CHECK(d->complete());
    CHECK(d->matches());
}

TEST_CASE("a hashed read is cut front to back, its requests shrinking to 1 MiB at the end, each left whole by engine/http") {
    constexpr std::uint64_t mib = 1u << 20;
    http_options given;
    given.connections_per_origin = 4;
    given.chunk_size = 8 * mib;
    const http_options o = resolved_http_options(given);
    std::vector<std::byte> file(64 * mib);  // never touched: only its addresses are cut
    const std::vector<read_op> ops = {{0, 40 * mib + 5, file.data(), 7}, {48 * mib, 16 * mib, file.data() + 48 * mib, 9}};
    const std::uint64_t total = ops[0].length + ops[1].length, most = http::piece_size(total, o);
    const tee_pieces cut = cut_for_tee(ops, file.size(), "f", o, true, {});
    REQUIRE(cut.pieces.size() == cut.op_of.size());
    // Every byte once, in order, each piece within its op with its tag and destination.
    std::uint64_t covered = 0;
    std::size_t op = 0;
    std::uint64_t at = ops[0].offset;
    for (std::size_t i = 0; i < cut.pieces.size(); ++i) {
        const read_op& p = cut.pieces[i];
        if (at == ops[op].offset + ops[op].length) at = ops[++op].offset;
        INFO("piece " << i << " at " << p.offset << " of " << p.length);
        CHECK(cut.op_of[i] == op);
        CHECK(p.offset == at);
        CHECK(p.tag == ops[op].tag);
        CHECK(p.dst == ops[op].dst + (p.offset - ops[op].offset));
        CHECK(p.length <= most);
        const bool last_of_op = p.offset + p.length == ops[op].offset + ops[op].length;
        if (!last_of_op) CHECK(p.length >= mib);
        if (i > 0 && cut.op_of[i - 1] == op) CHECK(p.length <= cut.pieces[i - 1].length);  // shrinking
        at += p.length;
        covered += p.length;
    }
    CHECK(covered == total);
    CHECK(cut.pieces.front().length > 4 * mib);  // large first: total / (2 x connections)
    for (std::size_t i = cut.pieces.size() - o.connections_per_origin; i < cut.pieces.size(); ++i)
        CHECK(cut.pieces[i].length <= mib);  // what the connections fetch last is small: little left to hash
    // engine/http makes one request of each (the tee follows each piece by its own landed bytes).
    const auto again = http::split_into_pieces(cut.pieces, file.size(), "f", o, {});
    REQUIRE(again.size() == cut.pieces.size());
    for (std::size_t i = 0; i < again.size(); ++i) CHECK((again[i].op_index == i && again[i].length == cut.pieces[i].length));
    // Not hashed (the cache's digest complete, verify off): engine/http's own cut.
    const tee_pieces plain = cut_for_tee(ops, file.size(), "f", o, false, {});
    const auto http_cut = http::split_into_pieces(ops, file.size(), "f", o, {});
    REQUIRE(plain.pieces.size() == http_cut.size());
    for (std::size_t i = 0; i < http_cut.size(); ++i)
        CHECK((plain.pieces[i].offset == http_cut[i].offset && plain.pieces[i].length == http_cut[i].length &&
               plain.op_of[i] == http_cut[i].op_index));
    // Ops asked for in one request (a GGUF header's reads) stay whole in a hashed read too.
    const std::vector<read_op> small = {{0, 3 * mib, file.data(), 1, true}, {8 * mib, 5 * mib, file.data() + 8 * mib, 2, true}};
    const tee_pieces whole = cut_for_tee(small, file.size(), "f", o, true, {});
    REQUIRE(whole.pieces.size() == 2);
    CHECK((whole.pieces[0].length == 3 * mib && whole.pieces[1].length == 5 * mib && whole.op_of[1] == 1));
    // An op beyond the file: Truncated naming it, as engine/http says.
    for (const bool hashed : {true, false})
        CHECK_THAT(kind_of([&] { cut_for_tee(ops, 60 * mib, "the file", o, hashed, {}); }),
                   Catch::StartsWith("Truncated") && Catch::Contains("the file"));
}

TEST_CASE("sources of one file writing it at once: the one that completes it publishes while the others write, none fails") {
    // Two readers of one file (ringsafe cp's, two threads' Readers) write the
    // same bytes into one entry. The write that completes the file publishes
    // it, which closes the temporary's descriptor: a write of the other
    // thread between its check and its pwrite used that descriptor closed
    // (EBADF, a failed load) or, reused by another open, wrote into another
    // file. TSan reports that race here (the TSan stage runs this test).
    temp_dir cache;
    const hub_path p = parse_hub_url("hf://org/race");
    std::vector<std::byte> data(256u << 10);
    fill_pattern(data, 5);
    constexpr std::size_t piece = 1024;
    for (int round = 0; round < 50; ++round) {
        fill_pattern(data, 5 + static_cast<std::uint64_t>(round));  // a blob of its own each round
        const std::string blob = sha_of(data), commit = std::string(39, 'a') + "b";
        auto e = hub_cache_entry::open(cache.path().string(), p, "f" + std::to_string(round) + ".bin", commit, commit, blob,
                                       data.size());
        REQUIRE(e);
        std::exception_ptr failed[2];
        std::atomic<int> ready{0};
        auto writer = [&](int who) {
            ready.fetch_add(1);
            while (ready.load() < 2) std::this_thread::yield();  // both write at once
            try {
                for (std::size_t k = 0; k < data.size(); k += piece) {  // one forwards, the other backwards
                    const std::size_t at = who == 0 ? k : data.size() - piece - k;
                    e->write(at, std::span(data).subspan(at, piece));
                }
            } catch (...) {
                failed[who] = std::current_exception();
            }
        };
        std::thread a(writer, 0), b(writer, 1);
        a.join();
        b.join();
        for (auto& f : failed)
            if (f) CHECK_THAT(kind_of([&] { std::rethrow_exception(f); }), Catch::Equals("no error"));
        REQUIRE(e->published());
        CHECK(read_file(cache / "models--org--race" / "blobs" / blob) == data);
    }
}
