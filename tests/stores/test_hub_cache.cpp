// The Hub cache (internal: stores/hub_cache.hpp): lookups in huggingface_hub's
// layout (try_to_load_from_cache's rules), and files written into it as they
// are read: never at their place before every byte is there, then blob,
// relative snapshot link and ref as huggingface_hub writes them.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "stores/hub_cache.hpp"
#include "stores/hub_path.hpp"
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
}

TEST_CASE("a file written into the cache appears only once every byte has landed, as huggingface_hub lays it out") {
    temp_dir cache;
    const hub_path p = parse_hub_url("hf://org/name");
    const fs::path repo = cache / "models--org--name";
    std::vector<std::byte> data(100'000);
    fill_pattern(data, 3);
    auto e = hub_cache_entry::open(cache.path().string(), p, "model.safetensors", "main", c1, "abc123", data.size());
    REQUIRE(e);
    // Out of order, overlapping, the last byte missing until the end.
    e->write(50'000, std::span(data).subspan(50'000, 49'999));
    e->write(0, std::span(data).subspan(0, 60'000));
    CHECK_FALSE(e->published());
    CHECK_FALSE(fs::exists(repo / "blobs" / "abc123"));
    CHECK_FALSE(fs::exists(repo / "snapshots"));
    CHECK_FALSE(fs::exists(repo / "refs"));
    for (auto& n : names_in(repo / "blobs")) CHECK(n.find("abc123") == std::string::npos);  // no half-written file anywhere
    // A second source of the same file shares the entry: its bytes complete it.
    auto again = hub_cache_entry::open(cache.path().string(), p, "model.safetensors", "main", c1, "abc123", data.size());
    CHECK(again == e);
    again->write(99'999, std::span(data).subspan(99'999, 1));
    CHECK(e->published());
    CHECK(read_file(repo / "blobs" / "abc123") == data);
    const fs::path link = repo / "snapshots" / c1 / "model.safetensors";
    REQUIRE(fs::is_symlink(link));
    CHECK(fs::read_symlink(link) == "../../blobs/abc123");
    CHECK(read_file(link) == data);
    const auto r = read_file(repo / "refs" / "main");
    CHECK(std::string(reinterpret_cast<const char*>(r.data()), r.size()) == c1);
    CHECK(fs::exists(cache / "CACHEDIR.TAG"));
    // Found from now on; and a second entry for it has nothing to write.
    CHECK(find_in_hub_cache(cache.path().string(), parse_hub_url("hf://org/name/model.safetensors")));
    e.reset();
    again.reset();
    CHECK_FALSE(hub_cache_entry::open(cache.path().string(), p, "model.safetensors", "main", c1, "abc123", data.size()));
}

TEST_CASE("a file read in part is never published; a nested path links back up its folders; a known blob is linked at once") {
    temp_dir cache;
    const hub_path p = parse_hub_url("hf://datasets/org/ds");
    const fs::path repo = cache / "datasets--org--ds";
    const std::string text = "0123456789";
    {
        auto e = hub_cache_entry::open(cache.path().string(), p, "a/b/c.bin", c2, c2, "blob1", text.size());
        REQUIRE(e);
        e->write(0, bytes_of(text.substr(0, 9)));
    }  // the last source goes: the temporary with it
    CHECK(names_in(repo / "blobs").empty());
    CHECK_FALSE(fs::exists(repo / "snapshots"));

    auto e = hub_cache_entry::open(cache.path().string(), p, "a/b/c.bin", c2, c2, "blob1", text.size());
    e->write(0, bytes_of(text));
    CHECK(fs::read_symlink(repo / "snapshots" / c2 / "a/b/c.bin") == "../../../../blobs/blob1");
    CHECK(read_file(repo / "snapshots" / c2 / "a/b/c.bin").size() == text.size());
    CHECK_FALSE(fs::exists(repo / "refs"));  // the revision asked for was the commit: no ref

    // The same blob under another commit and name: linked without writing anything.
    CHECK_FALSE(hub_cache_entry::open(cache.path().string(), p, "d.bin", "v1", c1, "blob1", text.size()));
    CHECK(fs::read_symlink(repo / "snapshots" / c1 / "d.bin") == "../../blobs/blob1");
    const auto r = read_file(repo / "refs" / "v1");
    CHECK(std::string(reinterpret_cast<const char*>(r.data()), r.size()) == c1);

    // An empty file is complete at once.
    auto empty = hub_cache_entry::open(cache.path().string(), p, "empty.txt", c1, c1, "e0", 0);
    REQUIRE(empty);
    CHECK(empty->published());
    CHECK(fs::file_size(repo / "snapshots" / c1 / "empty.txt") == 0);
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
        auto e = hub_cache_entry::open(cache.path().string(), p, "m.bin", "main", c1, "teeblob", data.size());
        REQUIRE(e);
        hub_cache_tee tee(e, ops);
        tee.landed(0, 100'000);
        tee.landed(0, 20'000);  // op 0 complete: written by the tee's thread
        tee.landed(1, 79'999);  // op 1 one byte short: left to finish()
        tee.finish();
        CHECK(e->published());
        CHECK(read_file(cache / "models--org--tee" / "snapshots" / c1 / "m.bin") == data);
    }
    {
        auto e = hub_cache_entry::open(cache.path().string(), p, "n.bin", "main", c2, "teeblob2", data.size());
        REQUIRE(e);
        {
            hub_cache_tee tee(e, ops);
            tee.landed(0, 120'000);
        }  // the read failed: no finish()
        CHECK_FALSE(e->published());
    }
    CHECK_FALSE(fs::exists(cache / "models--org--tee" / "blobs" / "teeblob2"));
    CHECK_FALSE(fs::exists(cache / "models--org--tee" / "snapshots" / c2));
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
        const std::string blob = "raceblob" + std::to_string(round), commit = std::string(39, 'a') + "b";
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
