// asio::async_open of local files and indexes: the same verdict as
// reader::open for every conformance file (buffered, header beyond the
// prefix, O_DIRECT), sharded indexes and their failures, cancellation (no
// descriptor left open), and no thread: the open runs as io_uring operations
// on the caller's io_context. The [threads] cases count the process's
// threads: run them in a process of their own (meson test asio_open_threads).
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <thread>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include "checkpoint_bytes.hpp"
#include "gguf_cases.hpp"
#include "gguf_files.hpp"
#include "open_verdict.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;
namespace net = boost::asio;
namespace ra = ringsafe::asio;

namespace {

// Three shards and their index in `dir`.
std::string write_sharded(const temp_dir& dir, const std::string& weight_map_extra = "") {
    return write_three_shards(dir.path(), "m.safetensors.index.json", weight_map_extra);
}

void write_checkpoint_to(const temp_dir& dir) { write_file(dir / "c.safetensors", build_file(mixed).bytes); }

}  // namespace

TEST_CASE("asio open: every conformance file gets reader::open's verdict and message", "[asio][open][conformance]") {
    reader_options ro;
    const int config = GENERATE(0, 1, 2);
    if (config >= 1) ro.source.file.prefetch = 16;  // every header takes the second read
    if (config == 2) ro.source.file.direct = true;
    std::size_t files = 0, accepted = 0;
    for (auto& e : fs::recursive_directory_iterator(conformance_dir())) {
        if (!e.is_regular_file()) continue;
        const std::string spec = e.path().string();
        INFO("config " << config << ": " << spec);
        const std::string sync = sync_verdict(spec, ro);
        CHECK(async_verdict(spec, ro) == sync);
        ++files;
        accepted += sync.starts_with("spec ");
    }
    CHECK(files >= 150);
    CHECK(accepted >= 55);
}

TEST_CASE("asio open: every GGUF conformance file and a split set get reader::open's verdict",
          "[asio][open][gguf]") {
    reader_options ro;
    if (GENERATE(0, 1)) ro.source.file.prefetch = 16;  // every header takes further reads
    std::size_t files = 0, accepted = 0;
    for (auto& e : fs::recursive_directory_iterator(gguf_conformance_dir())) {
        if (e.path().extension() != ".gguf") continue;
        const std::string spec = e.path().string();
        INFO(spec);
        const std::string sync = sync_verdict(spec, ro);
        CHECK(async_verdict(spec, ro) == sync);
        ++files;
        accepted += sync.starts_with("spec ");
    }
    CHECK(files >= 120);
    CHECK(accepted >= 70);
    // A split set made here, opened from its middle part; and one part missing.
    temp_dir dir;
    std::vector<gguf::tensor_record> recs{{"w", ggml_type::Q8_0, {64, 3}}};
    for (std::size_t p = 0; p < 3; ++p) {
        recs[0].name = "w" + std::to_string(p);
        write_file(dir / split_name("m", p + 1, 3), make_gguf(split_keys(p, 3, 3), recs, p));
    }
    const std::string middle = (dir / split_name("m", 2, 3)).string();
    const std::string sync = sync_verdict(middle, ro);
    CHECK(sync.find(" sharded\n") != std::string::npos);
    CHECK(async_verdict(middle, ro) == sync);
    fs::remove(dir / split_name("m", 3, 3));
    check_same_failure(middle, ro);
}

TEST_CASE("asio open: a sharded index opens with the same tensors, shards and metadata", "[asio][open][sharded]") {
    temp_dir dir;
    const std::string index = write_sharded(dir);
    reader_options ro;
    ro.parallel_shards = GENERATE(1u, 4u);
    ro.source.file.prefetch = GENERATE(std::uint64_t{16}, std::uint64_t{64u << 10});
    const std::string sync = sync_verdict(index, ro);
    REQUIRE(sync.starts_with("spec "));
    CHECK(sync.find("tensor z I64") != std::string::npos);
    CHECK(async_verdict(index, ro) == sync);
}

TEST_CASE("asio open: many more concurrent ring operations than the ring's depth all complete",
          "[asio][open][depth]") {
    temp_dir dir;
    const int shards = 48;
    const std::string index = write_one_tensor_shards(dir.path(), shards);
    reader_options ro;
    ro.parallel_shards = shards;   // every shard's openat, then its header reads, at once...
    ro.source.file.prefetch = 16;  // (two reads per header)
    ra::async_options ao;
    ao.queue_depth = 1;  // ...on a ring of 2 submission and 4 completion entries
    const std::string sync = sync_verdict(index, ro);
    REQUIRE(sync.starts_with("spec "));
    CHECK(async_verdict(index, ro, ao) == sync);

    // The same ring then reads every tensor.
    net::io_context io;
    std::vector<std::vector<std::byte>> bufs(shards, std::vector<std::byte>(5000));
    std::vector<std::span<std::byte>> dsts(bufs.begin(), bufs.end());
    ra::async_reader opened;
    ra::error_code open_ec, read_ec;
    std::size_t got = 0;
    std::vector<std::string> names;  // of bufs, in selection order
    ra::async_open(io.get_executor(), index, ro, [&](ra::error_code ec, ra::async_reader r) {
        open_ec = ec;
        opened = std::move(r);
        if (ec) return;
        selection sel = opened.get().all();
        for (auto i : sel.indices()) names.push_back(opened.get().tensors()[i].name);
        ra::async_read(opened, std::move(sel), dsts, [&](ra::error_code e, std::size_t n) {
            read_ec = e;
            got = n;
        });
    }, ao);
    io.run();
    REQUIRE_FALSE(open_ec);
    CHECK_FALSE(read_ec);
    CHECK(got == 5000u * shards);
    REQUIRE(names.size() == bufs.size());
    for (std::size_t i = 0; i < bufs.size(); ++i) {
        INFO(names[i]);
        CHECK(bufs[i] == tensor_bytes(names[i], 5000));
    }
}

TEST_CASE("asio open: failures give the blocking path's error and message", "[asio][open][errors]") {
    temp_dir dir;
    std::string spec;
    reader_options ro;
    SECTION("a missing file") { spec = (dir / "missing.safetensors").string(); }
    SECTION("a directory") { spec = dir.path().string(); }
    SECTION("a FIFO") {
        spec = (dir / "fifo").string();
        REQUIRE(::mkfifo(spec.c_str(), 0600) == 0);
    }
    SECTION("a truncated header") {
        auto bytes = build_file(mixed).bytes;
        bytes.resize(100);
        write_file(dir / "t.safetensors", bytes);
        spec = (dir / "t.safetensors").string();
        ro.source.file.prefetch = 16;
    }
    SECTION("bad file options") {
        spec = write_sharded(dir);
        ro.source.file.queue_depth = 0;
    }
    SECTION("an index whose shard is missing") {
        spec = write_sharded(dir, R"(,"w":"gone.safetensors")");
    }
    SECTION("an index naming a tensor its shard lacks") {
        spec = write_sharded(dir, R"(,"w":"b.safetensors")");
    }
    SECTION("an index that is not JSON") {
        write_file(dir / "bad.index.json", std::string("{\"weight_map\": "));
        spec = (dir / "bad.index.json").string();
    }
    check_same_failure(spec, ro);
}

TEST_CASE("asio open: cancellation completes with operation_aborted and closes what it opened",
          "[asio][open][cancel]") {
    temp_dir dir;
    const std::string spec = GENERATE(as<std::string>{}, "file", "index") == "file"
                                 ? (write_checkpoint_to(dir), (dir / "c.safetensors").string())
                                 : write_sharded(dir);
    const std::size_t fds = open_fds();
    {
        net::io_context io;
        net::cancellation_signal signal;
        status st;
        ra::error_code got;
        ra::async_reader opened;
        int calls = 0;
        ra::async_open(io.get_executor(), spec, reader_options{}, st,
                       net::bind_cancellation_slot(signal.slot(), [&](ra::error_code ec, ra::async_reader r) {
                           ++calls;
                           got = ec;
                           opened = std::move(r);
                       }));
        // Delivered once the open's first step is in flight.
        signal.emit(net::cancellation_type::terminal);
        io.run();
        REQUIRE(calls == 1);
        CHECK(got == net::error::operation_aborted);
        CHECK_FALSE(opened.valid());
        CHECK(st.message.find(spec) != std::string::npos);
    }
    CHECK(open_fds() == fds);  // the ring and every file opened so far are closed
}

TEST_CASE("asio open: files and indexes open on the io_context's thread without starting a thread",
          "[asio][open][threads]") {
    temp_dir dir;
    const std::string index = write_sharded(dir);
    const std::string file = (dir / "c.safetensors").string();
    reader_options direct;
    direct.source.file.direct = true;
    const std::size_t threads = user_threads();
    net::io_context io;
    const auto me = std::this_thread::get_id();
    std::size_t most = threads;
    int done = 0;
    std::vector<std::size_t> counts;
    for (const auto& [spec, ro] : std::vector<std::pair<std::string, reader_options>>{
             {file, {}}, {index, {}}, {file, direct}, {(dir / "missing").string(), {}}}) {
        ra::async_open(io.get_executor(), spec, ro, [&, spec = spec](ra::error_code ec, ra::async_reader r) {
            INFO(spec);
            CHECK(std::this_thread::get_id() == me);
            CHECK(ec == (spec.ends_with("missing") ? ra::error_code(std::error_code(ENOENT, std::system_category()))
                                                   : ra::error_code()));
            if (r.valid()) counts.push_back(r.get().tensors().size());
            most = std::max(most, user_threads());
            ++done;
        });
    }
    io.run();
    CHECK(done == 4);
    std::sort(counts.begin(), counts.end());  // the opens ran concurrently: any order
    CHECK(counts == std::vector<std::size_t>{mixed.size(), mixed.size(), 3 + mixed.size()});
    CHECK(most == threads);  // no pool thread, no event loop of ours
    CHECK(user_threads() == threads);
}

TEST_CASE("asio open: custom opens (reader_options::open) still open, on the blocking pool", "[asio][open][custom]") {
    temp_dir dir;
    const std::string index = write_sharded(dir);
    reader_options ro;
    std::vector<std::string> asked;
    std::mutex m;
    ro.open = [&](const std::string& spec) {
        std::lock_guard lock(m);
        asked.push_back(spec);
        return open_file(spec);
    };
    const std::string sync = sync_verdict(index, ro);
    REQUIRE(sync.starts_with("spec "));
    const std::size_t sync_calls = asked.size();
    CHECK(sync_calls == 4);  // the index and its three shards
    CHECK(async_verdict(index, ro) == sync);
    CHECK(asked.size() == 2 * sync_calls);  // the async open went through the custom open too
}
