// Sharded checkpoints: index parsing, shard paths, and reader::open over an
// index (allow-list checks, parallel header reads, reads spread over shards).
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>

#include "checkpoint_bytes.hpp"
#include "memory_source.hpp"
#include "ringsafe/index.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
    std::vector<std::byte> v(s.size());
    std::memcpy(v.data(), s.data(), s.size());
    return v;
}

// Counts how many callers are inside at once; each waits (up to 5 s) for a
// second one to arrive, so a sequential caller shows up as max_inside == 1.
struct rendezvous {
    std::mutex m;
    std::condition_variable cv;
    int inside = 0, max_inside = 0;
    void meet() {
        std::unique_lock lk(m);
        max_inside = std::max(max_inside, ++inside);
        cv.notify_all();
        cv.wait_for(lk, std::chrono::seconds(5), [&] { return max_inside >= 2; });
        --inside;
    }
};

const std::vector<tensor_spec> shard1 = {
    {"a", "F32", {4, 4}, 64}, {"b", "U8", {10}, 10}};
const std::vector<tensor_spec> shard2 = {
    {"c", "I64", {3}, 24}, {"d", "F16", {2, 8}, 32}};

std::string index_json(const std::string& extra_map = "") {
    return R"({"metadata": {"total_size": 130, "format": "pt"}, "weight_map": {)"
           R"("a": "m-1.safetensors", "b": "m-1.safetensors", "c": "m-2.safetensors", "d": "m-2.safetensors")" +
           extra_map + "}}";
}

// A store with the index and both shards under /ckpt/.
void fill_store(memory_store& st, const std::string& index, std::vector<tensor_spec> s1 = shard1,
                std::vector<tensor_spec> s2 = shard2) {
    st.objects["/ckpt/model.safetensors.index.json"] = bytes_of(index);
    st.objects["/ckpt/m-1.safetensors"] = build_file(s1).bytes;
    st.objects["/ckpt/m-2.safetensors"] = build_file(s2).bytes;
}

reader open_store(memory_store& st, const std::string& spec = "/ckpt/model.safetensors.index.json") {
    reader_options o;
    o.open = st.opener();
    return reader::open(spec, o);
}

}  // namespace

TEST_CASE("index: parsing, metadata and refusals", "[index]") {
    auto idx = parse_index(index_json(), "i.json");
    CHECK(idx.shards == std::vector<std::string>{"m-1.safetensors", "m-2.safetensors"});
    REQUIRE(idx.weight_map.size() == 4);
    CHECK(idx.shard_of("c") == 1);
    CHECK(idx.shard_of("zz") == -1);
    REQUIRE(idx.metadata);
    CHECK(idx.metadata->at("total_size") == "130");
    CHECK(idx.metadata->at("format") == "pt");
    CHECK_FALSE(parse_index(R"({"weight_map": {}})", "i.json").metadata);

    auto refused = [](const std::string& text) { return kind_of([&] { parse_index(text, "idx.json"); }); };
    auto dup = refused(R"({"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}})");
    CHECK(dup.find("InvalidIndex") == 0);
    CHECK(dup.find("'a'") != std::string::npos);
    CHECK(dup.find("idx.json") != std::string::npos);
    CHECK(refused(R"({"weight_map": {}, "weight_map": {}})").find("InvalidIndex") == 0);
    CHECK(refused(R"({"weight_map": {"a": 1}})").find("InvalidIndex") == 0);
    CHECK(refused(R"({"metadata": {}})").find("InvalidIndex") == 0);
    CHECK(refused(R"({"weight_map": []})").find("InvalidIndex") == 0);
    CHECK(refused(R"([1, 2])").find("InvalidIndex") == 0);
    CHECK(refused(R"({"weight_map": {}} x)").find("InvalidIndex") == 0);
    CHECK(refused("{\"weight_map\": {").find("InvalidIndex") == 0);
    for (std::string bad : {"../m.safetensors", "/etc/m.safetensors", "a/../../m", "a\\\\b", "", "http://x/m"}) {
        INFO(bad);
        CHECK(refused(R"({"weight_map": {"a": ")" + bad + R"("}})").find("InvalidIndex") == 0);
    }
    CHECK(refused(R"({"weight_map": {"a": "sub/m.safetensors"}})") == "no error");
}

TEST_CASE("index: shard paths and detection", "[index]") {
    CHECK(resolve_shard("/d/x/model.safetensors.index.json", "m-1.safetensors") == "/d/x/m-1.safetensors");
    CHECK(resolve_shard("model.safetensors.index.json", "m-1.safetensors") == "m-1.safetensors");
    CHECK(resolve_shard("https://h.example/r/main/model.index.json?sig=1#f", "m-1.safetensors") ==
          "https://h.example/r/main/m-1.safetensors");
    CHECK(resolve_shard("http://h.example", "m.safetensors") == "http://h.example/m.safetensors");

    auto idx = bytes_of(index_json());
    CHECK(looks_like_index("x.index.json", {}, 0));
    CHECK(looks_like_index("https://h/x.json?a=b", {}, 0));
    CHECK(looks_like_index("weights.idx", idx, idx.size()));
    // A real file whose length prefix starts with '{' (N = 123) is not an index.
    auto f = build_file({{"w", "U8", {123 - 56}, 123 - 56}}, 123);
    REQUIRE(f.bytes[0] == std::byte{'{'});
    CHECK_FALSE(looks_like_index("w.safetensors", f.bytes, f.bytes.size()));
    CHECK_FALSE(looks_like_index("w.safetensors", build_file(shard1).bytes, 200));
}

TEST_CASE("sharded: one checkpoint over both shards, reads spread across them", "[index][reader]") {
    memory_store st;
    fill_store(st, index_json());
    rendezvous opens, runs;
    st.on_open = [&](const std::string& spec) {
        if (spec.ends_with(".safetensors")) opens.meet();
    };
    st.configure = [&](memory_source& s) { s.on_execute = [&] { runs.meet(); }; };
    reader r = open_store(st);
    CHECK(r.sharded());
    CHECK(opens.max_inside == 2);  // shard headers were read in parallel
    REQUIRE(r.shards().size() == 2);
    CHECK(r.shards()[1].spec == "/ckpt/m-2.safetensors");
    CHECK(r.shards()[1].first_tensor == 2);
    REQUIRE(r.tensors().size() == 4);
    CHECK(r.tensors()[2].name == "c");
    CHECK(r.shard_of(*r.index_of("d")) == 1);
    CHECK_FALSE(r.metadata());  // the shards have none; the index's "metadata" is not the checkpoint's

    auto sel = r.all();
    std::vector<std::byte> arena(r.packed_size(sel, 16));
    auto placed = r.read_packed(sel, arena, 16);
    CHECK(runs.max_inside == 2);  // both shards executed at once
    for (auto& p : placed) {
        const auto& t = r.tensors()[p.tensor];
        CHECK(std::memcmp(arena.data() + p.offset, tensor_bytes(t.name, t.size()).data(), t.size()) == 0);
    }
    CHECK(st.opened["/ckpt/m-1.safetensors"]->executed.size() == 1);
    CHECK(st.opened["/ckpt/m-2.safetensors"]->executed.size() == 1);
    // Only shard 2 is touched when only its tensors are read.
    std::vector<std::byte> d(32);
    r.read_rows("d", 1, 2, std::span(d).subspan(0, 16));
    CHECK(st.opened["/ckpt/m-1.safetensors"]->executed.size() == 1);
    CHECK(std::memcmp(d.data(), tensor_bytes("d", 32).data() + 16, 16) == 0);
}

TEST_CASE("sharded: the index is an allow-list", "[index][reader]") {
    SECTION("missing shard file") {
        memory_store st;
        fill_store(st, index_json());
        st.objects.erase("/ckpt/m-2.safetensors");
        auto k = kind_of([&] { open_store(st); });
        CHECK(k.find("IoError") == 0);
        CHECK(k.find("m-2.safetensors") != std::string::npos);
    }
    SECTION("tensor in two shards") {
        memory_store st;
        auto s2 = shard2;
        s2.push_back({"a", "F32", {4, 4}, 64});
        fill_store(st, index_json(), shard1, s2);
        auto k = kind_of([&] { open_store(st); });
        CHECK(k.find("InvalidIndex") == 0);
        CHECK(k.find("'a'") != std::string::npos);
        CHECK(k.find("m-1.safetensors") != std::string::npos);
        CHECK(k.find("m-2.safetensors") != std::string::npos);
    }
    SECTION("tensor in a shard but not in the map") {
        memory_store st;
        auto s1 = shard1;
        s1.push_back({"extra", "U8", {1}, 1});
        fill_store(st, index_json(), s1);
        auto k = kind_of([&] { open_store(st); });
        CHECK(k.find("InvalidIndex") == 0);
        CHECK(k.find("'extra'") != std::string::npos);
        CHECK(k.find("not in the weight_map") != std::string::npos);
    }
    SECTION("map names another shard") {
        memory_store st;
        std::string idx = R"({"weight_map": {"a": "m-2.safetensors", "b": "m-1.safetensors",)"
                          R"( "c": "m-2.safetensors", "d": "m-2.safetensors"}})";
        fill_store(st, idx);
        auto k = kind_of([&] { open_store(st); });
        CHECK(k.find("InvalidIndex") == 0);
        CHECK(k.find("'a' is in shard 'm-1.safetensors' but the weight_map maps it to 'm-2.safetensors'") !=
              std::string::npos);
    }
    SECTION("map names a tensor its shard lacks") {
        memory_store st;
        fill_store(st, index_json(R"(, "ghost": "m-1.safetensors")"));
        auto k = kind_of([&] { open_store(st); });
        CHECK(k.find("InvalidIndex") == 0);
        CHECK(k.find("'ghost'") != std::string::npos);
    }
    SECTION("a broken shard header names the shard") {
        memory_store st;
        fill_store(st, index_json());
        st.objects["/ckpt/m-1.safetensors"].resize(20);
        auto k = kind_of([&] { open_store(st); });
        CHECK(k.find("m-1.safetensors") != std::string::npos);
    }
}

TEST_CASE("sharded: an error in one shard wins over the others' cancellation", "[index][reader]") {
    memory_store st;
    fill_store(st, index_json());
    reader r = open_store(st);
    const auto& c = r.at("c");
    st.opened["/ckpt/m-2.safetensors"]->fail_at = r.shards()[1].data_start + c.begin + 3;
    auto sel = r.all();
    std::vector<std::byte> arena(r.packed_size(sel, 1));
    auto k = kind_of([&] { r.read_packed(sel, arena, 1); });
    CHECK(k.find("IoError") == 0);
    CHECK(k.find("'c'") != std::string::npos);

    std::atomic<bool> stop{true};
    read_control ctl;
    ctl.cancel = &stop;
    CHECK(kind_of([&] { r.read_packed(sel, arena, 1, ctl); }).find("Cancelled") == 0);
}

TEST_CASE("sharded: real files through open_source, detected by content too", "[index][reader]") {
    temp_dir dir;
    write_file(dir / "m-1.safetensors", build_file(shard1).bytes);
    write_file(dir / "m-2.safetensors", build_file(shard2).bytes);
    write_file(dir / "model.safetensors.index.json", index_json());
    write_file(dir / "model.idx", index_json());
    for (const char* name : {"model.safetensors.index.json", "model.idx"}) {
        INFO(name);
        reader r = reader::open((dir / name).string());
        REQUIRE(r.tensors().size() == 4);
        std::vector<std::byte> c(24), a(64);
        std::vector<std::span<std::byte>> dsts{c, a};
        r.read(r.select({"c", "a"}), dsts);
        CHECK(c == tensor_bytes("c", 24));
        CHECK(a == tensor_bytes("a", 64));
    }
    std::filesystem::remove(dir / "m-1.safetensors");
    auto k = kind_of([&] { reader::open((dir / "model.safetensors.index.json").string()); });
    CHECK(k.find("m-1.safetensors") != std::string::npos);
}

namespace {

// Writes the shards of index_json() under `dir` with the library's writer, with
// `m1` and `m2` as their __metadata__ (none for nullopt).
void write_shards(const temp_dir& dir, const std::optional<metadata_map>& m1, const std::optional<metadata_map>& m2) {
    auto write = [&](const char* name, const std::vector<tensor_spec>& specs, const std::optional<metadata_map>& m) {
        writer w((dir / name).string());
        for (auto& t : specs) {
            std::vector<std::uint64_t> shape = t.shape;
            w.add(t.name, dtype_from_name(t.dtype).value(), shape, tensor_bytes(t.name, t.bytes));
        }
        w.finish(m ? &*m : nullptr);
    };
    write("m-1.safetensors", shard1, m1);
    write("m-2.safetensors", shard2, m2);
    write_file(dir / "model.safetensors.index.json", index_json());
}

}  // namespace

TEST_CASE("sharded: metadata() is the shards' __metadata__ entries equal in every shard, never the index's",
          "[index][reader]") {
    temp_dir dir;
    const std::string index = (dir / "model.safetensors.index.json").string();
    write_shards(dir, metadata_map{{"format", "pt"}, {"step", "1"}, {"only_first", "x"}},
                 metadata_map{{"format", "pt"}, {"step", "2"}});
    reader r = reader::open(index);
    REQUIRE(r.metadata());
    CHECK(*r.metadata() == metadata_map{{"format", "pt"}});
    CHECK(r.shards()[0].metadata->at("step") == "1");  // each shard's own stays on its shard_info

    write_shards(dir, metadata_map{{"format", "pt"}}, metadata_map{{"format", "tf"}});
    CHECK_FALSE(reader::open(index).metadata());
    write_shards(dir, metadata_map{{"format", "pt"}}, std::nullopt);
    CHECK_FALSE(reader::open(index).metadata());
}
