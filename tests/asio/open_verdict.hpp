// What the async_open tests compare: a reader's whole description (tensors,
// metadata, shards, the bytes of every tensor) or the error, as text, from
// reader::open and from asio::async_open on a fresh single-threaded
// io_context, whose handler must run on the thread running it.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "checkpoint_bytes.hpp"
#include "ringsafe/asio.hpp"
#include "test_support.hpp"

namespace ringsafe::test {

// Tensors (name, dtype, shape, offsets, shard, SHA-256 of its bytes read by
// `r`), metadata and shards of an open reader, one line each.
inline std::string describe_reader(reader& r) {
    std::string out = "spec " + r.spec() + (r.sharded() ? " sharded\n" : "\n");
    auto meta = [&](const std::optional<metadata_map>& m) {
        if (!m) return std::string("null");
        std::string s = "{";
        for (auto& [k, v] : *m) s += k + "=" + v + ";";
        return s + "}";
    };
    out += "metadata " + meta(r.metadata()) + "\n";
    for (auto& s : r.shards())
        out += "shard " + s.spec + " size " + std::to_string(s.size) + " data " + std::to_string(s.data_start) +
               " tensors " + std::to_string(s.first_tensor) + "+" + std::to_string(s.tensor_count) + " metadata " +
               meta(s.metadata) + (s.gguf ? " gguf v" + std::to_string(s.gguf->version) + " entries " +
                                                 std::to_string(s.gguf->metadata.size())
                                           : std::string()) +
               "\n";
    const auto bytes = read_tensors(r);
    for (std::uint32_t i = 0; i < r.tensors().size(); ++i) {
        const tensor_info& t = r.tensors()[i];
        out += "tensor " + t.name + " " + std::string(dtype_name(t.dtype)) +
               (t.ggml == ggml_type::none ? "" : "/" + std::string(ggml_type_name(t.ggml))) + " [";
        for (auto d : t.shape) out += std::to_string(d) + ",";
        out += "] " + std::to_string(t.begin) + ".." + std::to_string(t.end) + " shard " +
               std::to_string(r.shard_of(i)) + " " + sha256_hex(bytes.at(t.name)) + "\n";
    }
    return out;
}

inline std::string describe_failure(const status& st) {
    return std::string("error ") + st.code.category().name() + ":" + std::to_string(st.code.value()) + " " +
           st.message;
}

inline std::string sync_verdict(const std::string& spec, const reader_options& ro) {
    status st;
    auto r = reader::open(spec, ro, st);
    return r ? describe_reader(*r) : describe_failure(st);
}

// async_open's verdict; CHECKs that the handler ran once, on this thread, with
// the status's code (and the async_reader valid exactly on success).
inline std::string async_verdict(const std::string& spec, const reader_options& ro, asio::async_options ao = {}) {
    boost::asio::io_context io;
    status st;
    asio::error_code got;
    asio::async_reader opened;
    int calls = 0;
    std::thread::id ran_on;
    asio::async_open(io.get_executor(), spec, ro, st,
                     [&](asio::error_code ec, asio::async_reader r) {
                         ++calls;
                         got = ec;
                         opened = std::move(r);
                         ran_on = std::this_thread::get_id();
                     }, ao);
    io.run();
    REQUIRE(calls == 1);
    CHECK(ran_on == std::this_thread::get_id());
    CHECK(st.code == static_cast<std::error_code>(got));
    CHECK(opened.valid() == !got);
    return got ? describe_failure(st) : describe_reader(opened.get());
}

// Three shards in `dir` (a: x, y; b: z; c: the `mixed` tensors) and the index
// `index_name` naming them, its weight_map extended by `weight_map_extra`
// (",\"name\":\"shard\"..."). Returns the index's path.
inline std::string write_three_shards(const std::filesystem::path& dir, const std::string& index_name,
                                      const std::string& weight_map_extra = "") {
    write_file(dir / "a.safetensors", build_file({{"x", "F32", {1000}, 4000}, {"y", "U8", {3000}, 3000}}).bytes);
    write_file(dir / "b.safetensors", build_file({{"z", "I64", {500}, 4000}}).bytes);
    write_file(dir / "c.safetensors", build_file(mixed).bytes);
    std::string map = R"("x":"a.safetensors","y":"a.safetensors","z":"b.safetensors")";
    for (auto& t : mixed) map += ",\"" + t.name + "\":\"c.safetensors\"";
    write_file(dir / index_name,
               R"({"metadata":{"total_size":123,"format":"pt"},"weight_map":{)" + map + weight_map_extra + "}}");
    return (dir / index_name).string();
}

// `n` shards in `dir` (s<i>.safetensors holding tensor t<i>: 5000 U8 bytes)
// and their index, m.safetensors.index.json. Returns the index's path.
inline std::string write_one_tensor_shards(const std::filesystem::path& dir, int n) {
    std::string map;
    for (int i = 0; i < n; ++i) {
        const std::string t = "t" + std::to_string(i), f = "s" + std::to_string(i) + ".safetensors";
        write_file(dir / f, build_file({{t, "U8", {5000}, 5000}}).bytes);
        map += (i ? ",\"" : "\"") + t + "\":\"" + f + "\"";
    }
    write_file(dir / "m.safetensors.index.json", R"({"weight_map":{)" + map + "}}");
    return (dir / "m.safetensors.index.json").string();
}

// `spec` fails to open, and async_open fails exactly as reader::open does.
inline void check_same_failure(const std::string& spec, const reader_options& ro) {
    const std::string sync = sync_verdict(spec, ro);
    INFO(sync);
    REQUIRE(sync.starts_with("error "));
    CHECK(async_verdict(spec, ro) == sync);
}

}  // namespace ringsafe::test
