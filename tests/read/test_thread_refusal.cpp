// The reader when the system refuses threads (EAGAIN: a process, user or
// cgroup thread limit): opening a sharded index and reading it start helper
// threads and a cancel watcher; any of those starts may be refused, and the
// call must then finish on the threads it has, with the exact bytes, or fail
// with a ringsafe::error, never std::terminate from a joinable thread
// destroyed while unwinding. Refusals come from read/thread_start.hpp's test
// hook, at each position in turn (internal: ringsafe_internal_dep).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>

#include "checkpoint_bytes.hpp"
#include "memory_source.hpp"
#include "read/thread_start.hpp"
#include "ringsafe/reader.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

constexpr int shard_count = 6;

std::vector<std::byte> bytes_of(const std::string& s) {
    std::vector<std::byte> v(s.size());
    std::memcpy(v.data(), s.data(), s.size());
    return v;
}

std::string tensor_name(int s, int k) { return "s" + std::to_string(s) + ".t" + std::to_string(k); }

// An index of shard_count shards, two U8 tensors each, under /ckpt/.
void fill_store(memory_store& st) {
    std::string map;
    for (int s = 0; s < shard_count; ++s) {
        std::vector<tensor_spec> specs;
        const std::string file = "m-" + std::to_string(s) + ".safetensors";
        for (int k = 0; k < 2; ++k) {
            const std::uint64_t n = 1000 + 37 * s + 5 * k;
            specs.push_back({tensor_name(s, k), "U8", {n}, n});
            map += (map.empty() ? "\"" : ", \"") + tensor_name(s, k) + "\": \"" + file + "\"";
        }
        st.objects["/ckpt/" + file] = build_file(specs).bytes;
    }
    st.objects["/ckpt/model.safetensors.index.json"] = bytes_of(R"({"metadata": {}, "weight_map": {)" + map + "}}");
}

// Refuses every thread start from the `first`-th on (counting from 0) while it lives; counts the starts asked.
struct refusals {
    std::atomic<std::uint64_t> asked{0};
    explicit refusals(std::uint64_t first) {
        read::set_thread_start_fault([this, first](std::uint64_t n) {
            asked.fetch_add(1);
            return n >= first;
        });
    }
    ~refusals() { read::set_thread_start_fault({}); }
    refusals(const refusals&) = delete;
    refusals& operator=(const refusals&) = delete;
};

// Opens the index (4 shards at a time) and reads every tensor with a cancel
// flag (which starts the watcher); checks every byte.
void open_and_read(memory_store& st, const std::atomic<bool>& cancel) {
    reader_options o;
    o.open = st.opener();
    o.parallel_shards = 4;
    reader r = reader::open("/ckpt/model.safetensors.index.json", o);
    const auto& ts = r.tensors();
    REQUIRE(ts.size() == 2 * shard_count);
    std::vector<std::vector<std::byte>> got;
    std::vector<std::span<std::byte>> dsts;
    for (const auto& t : ts) got.emplace_back(t.end - t.begin, std::byte{0xA5});
    for (auto& g : got) dsts.emplace_back(g);
    read_control ctl;
    ctl.cancel = &cancel;
    r.read(r.all(), dsts, ctl);
    for (std::size_t i = 0; i < ts.size(); ++i) {
        INFO(ts[i].name);
        CHECK(got[i] == tensor_bytes(ts[i].name, got[i].size()));
    }
}

}  // namespace

TEST_CASE("an index opens and reads whichever of its thread starts the system refuses", "[threads]") {
    memory_store st;
    fill_store(st);
    std::atomic<bool> cancel{false};
    std::uint64_t unrefused = 0;
    {
        refusals none(~std::uint64_t{0});
        open_and_read(st, cancel);
        unrefused = none.asked.load();
    }
    // The open's 3 helpers, then the read's watcher and its 3 helpers.
    CHECK(unrefused == 7);
    for (std::uint64_t first = 0; first <= unrefused; ++first) {
        INFO("every thread start refused from start #" << first << " on (counting from 0)");
        refusals some(first);
        open_and_read(st, cancel);
        CHECK(some.asked.load() >= std::min(first + 1, unrefused));
    }
}

TEST_CASE("with no thread for the watcher a read still stops at the caller's flag", "[threads]") {
    memory_store st;
    fill_store(st);
    std::atomic<bool> cancel{false};
    std::atomic<int> executed{0};
    st.configure = [&](memory_source& s) {
        s.on_execute = [&] {
            if (executed.fetch_add(1) == 0) cancel.store(true);  // the caller gives up during the first shard
        };
    };
    reader_options o;
    o.open = st.opener();
    reader r = reader::open("/ckpt/model.safetensors.index.json", o);
    std::vector<std::byte> arena(r.packed_size(r.all(), 64));
    read_control ctl;
    ctl.cancel = &cancel;
    refusals all(0);
    const error e = expect_error([&] { r.read_packed(r.all(), arena, 64, ctl); });
    CHECK(e.code() == make_error_code(errc::Cancelled));
    CHECK(executed.load() == 1);  // the shards after it never started
    CHECK(all.asked.load() == 1);  // the watcher, refused: one thread for every shard
}

TEST_CASE("with no helper threads the first failing shard is the error", "[threads]") {
    memory_store st;
    fill_store(st);
    st.configure = [](memory_source& s) {
        if (s.name() == "/ckpt/m-2.safetensors") s.fail_at = s.size() - 1;
    };
    reader_options o;
    o.open = st.opener();
    reader r = reader::open("/ckpt/model.safetensors.index.json", o);
    std::vector<std::byte> arena(r.packed_size(r.all(), 64));
    std::atomic<bool> cancel{false};
    read_control ctl;
    ctl.cancel = &cancel;
    refusals all(0);
    const error e = expect_error([&] { r.read_packed(r.all(), arena, 64, ctl); });
    CHECK(e.code() == make_error_code(errc::IoError));
    CHECK_THAT(e.what(), Catch::Contains("m-2.safetensors") && Catch::Contains("injected failure"));
}
