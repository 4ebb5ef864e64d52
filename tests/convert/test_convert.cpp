// Tests for include/ringsafe/convert.hpp: what a GGUF source's metadata becomes
// in a safetensors target (each value's JSON text), the result record and the
// callbacks, a cancel (before the start and midway) leaving nothing at the
// target, and options refused before anything is created. The conversions'
// bytes, each direction, are tested through `ringsafe cp` and ringsafe.convert
// (tests/python/test_gguf_convert.py, test_convert.py) against gguf-py.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <vector>

#include "gguf_files.hpp"
#include "ringsafe/convert.hpp"
#include "ringsafe/reader.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;
namespace fs = std::filesystem;
using gguf::metadata_entry;
using gguf::value_type;

namespace {

std::vector<std::string> listing(const fs::path& d) {
    std::vector<std::string> out;
    for (auto& e : fs::directory_iterator(d)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

// `n` F32 tensors of `elements` each.
std::vector<gguf::tensor_record> f32_tensors(std::size_t n, std::uint64_t elements) {
    std::vector<gguf::tensor_record> out;
    for (std::size_t i = 0; i < n; ++i) out.push_back({"t." + std::to_string(i), ggml_type::F32, {elements}});
    return out;
}

errc code_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const error& e) {
        return static_cast<errc>(e.code().value());
    }
    return errc{};
}

}  // namespace

TEST_CASE("convert_file: GGUF metadata becomes gguf.KEY entries, each value's JSON text") {
    temp_dir t;
    const std::vector<gguf::scalar> tokens{std::string_view("a"), std::string_view("\xc4\xa0" "b"),
                                           std::string_view("\"q\"")};
    const std::vector<metadata_entry> md{
        metadata_entry::make("general.architecture", value_type::STRING, std::string_view("llama")),
        metadata_entry::make("general.name", value_type::STRING, std::string_view("x\xff" "y\xe2\x82")),  // not UTF-8
        metadata_entry::make("f32", value_type::FLOAT32, 0.1),
        metadata_entry::make("f64", value_type::FLOAT64, 0.1),
        metadata_entry::make("nan", value_type::FLOAT32, std::numeric_limits<double>::quiet_NaN()),
        metadata_entry::make("inf", value_type::FLOAT64, -std::numeric_limits<double>::infinity()),
        metadata_entry::make("i32", value_type::INT32, std::int64_t{-5}),
        metadata_entry::make("u64", value_type::UINT64, std::uint64_t{18446744073709551615ull}),
        metadata_entry::make("flag", value_type::BOOL, true),
        metadata_entry::make_array("tokens", value_type::STRING, tokens),
    };
    write_file(t / "m.gguf", make_gguf(md, f32_tensors(3, 16)));
    std::vector<std::size_t> done_positions;
    read_control ctl;
    ctl.on_tensor_done = [&](std::size_t pos, const tensor_info& ti) {
        CHECK(ti.name == "t." + std::to_string(pos));
        done_positions.push_back(pos);
    };
    convert_options o;
    o.sync = false;
    const auto res = convert_file((t / "m.gguf").string(), (t / "m.safetensors").string(), o, ctl);
    CHECK(res.files == std::vector<std::string>{(t / "m.safetensors").string()});
    CHECK(res.tensors == 3);
    CHECK(res.bytes == 3 * 64);
    CHECK(done_positions == std::vector<std::size_t>{0, 1, 2});
    auto r = reader::open((t / "m.safetensors").string());
    REQUIRE(r.metadata());
    const auto& m = *r.metadata();
    CHECK(m.at("gguf.general.architecture") == "\"llama\"");
    CHECK(m.at("gguf.general.name") == "\"x\xef\xbf\xbdy\xef\xbf\xbd\xef\xbf\xbd\"");  // each stray byte U+FFFD
    CHECK(m.at("gguf.f32") == "0.10000000149011612");
    CHECK(m.at("gguf.f64") == "0.1");
    CHECK(m.at("gguf.nan") == "\"NaN\"");
    CHECK(m.at("gguf.inf") == "\"-Infinity\"");
    CHECK(m.at("gguf.i32") == "-5");
    CHECK(m.at("gguf.u64") == "18446744073709551615");
    CHECK(m.at("gguf.flag") == "true");
    CHECK(m.at("gguf.tokens") == "[\"a\",\"\xc4\xa0" "b\",\"\\\"q\\\"\"]");
    CHECK(r.tensors().size() == 3);
}

TEST_CASE("convert_file: a cancel, before the start or midway, leaves nothing at the target") {
    temp_dir t;
    // 16 MiB in 4 tensors: with 4 buffers, batches of 4 MiB, so there is a midway.
    write_file(t / "m.gguf", make_gguf({}, f32_tensors(4, 1u << 20)));
    convert_options o;
    o.sync = false;
    std::atomic<bool> stop{true};
    read_control ctl;
    ctl.cancel = &stop;
    for (const char* out : {"out.safetensors", "out.gguf"})
        CHECK(code_of([&] { convert_file((t / "m.gguf").string(), (t / out).string(), o, ctl); }) == errc::Cancelled);
    CHECK(listing(t.path()) == std::vector<std::string>{"m.gguf"});

    stop = false;
    std::uint64_t last = 0, reports = 0;
    ctl.on_progress = [&](std::uint64_t done, std::uint64_t total) {
        CHECK(total == 16u << 20);
        last = done;
        ++reports;
        if (done > 0) stop = true;  // after the first batch went to the writer
    };
    for (const char* out : {"out.safetensors", "out.gguf"}) {
        last = reports = 0;
        stop = false;
        CHECK(code_of([&] { convert_file((t / "m.gguf").string(), (t / out).string(), o, ctl); }) == errc::Cancelled);
        CHECK(reports == 2);  // 0, then the first batch: the cancel stops the next
        CHECK(last < (16u << 20));
    }
    CHECK(listing(t.path()) == std::vector<std::string>{"m.gguf"});

    stop = false;  // and the same conversion, not cancelled, completes
    ctl.on_progress = nullptr;
    const auto res = convert_file((t / "m.gguf").string(), (t / "out.gguf").string(), o, ctl);
    CHECK(res.bytes == 16u << 20);
    CHECK(res.buffers >= 1);
    CHECK(res.buffer_bytes >= (4u << 20));  // about total / buffers: one batch per buffer
    CHECK(res.buffer_bytes <= (4u << 20) + 4096);
}

TEST_CASE("convert_file: options it cannot use are refused before anything is created") {
    temp_dir t;
    write_file(t / "m.gguf", make_gguf({}, f32_tensors(1, 16)));
    const auto src = (t / "m.gguf").string();
    auto refused = [&](const std::string& out, const convert_options& o) {
        return code_of([&] { convert_file(src, (t / out).string(), o); });
    };
    convert_options o;
    o.buffer_size = 4096;
    CHECK(refused("a.safetensors", o) == errc::InvalidArgument);
    o = {};
    o.buffers = 1;
    CHECK(refused("a.safetensors", o) == errc::InvalidArgument);
    o = {};
    o.dequantize_to = dtype::I8;
    CHECK(refused("a.safetensors", o) == errc::InvalidArgument);
    o = {};
    o.split_max_tensors = 1;
    CHECK(refused("a.safetensors", o) == errc::InvalidArgument);
    o = {};
    o.max_shard_size = 1u << 20;
    CHECK(refused("a.gguf", o) == errc::InvalidArgument);
    CHECK(listing(t.path()) == std::vector<std::string>{"m.gguf"});
    CHECK(gguf_target("X.GGUF"));
    CHECK_FALSE(gguf_target("x.safetensors"));
    CHECK(split_part_name("dir/m.gguf", 1, 3) == "dir/m-00002-of-00003.gguf");
}
