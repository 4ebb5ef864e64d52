// read::read_dequantized (engine/read/dequantized_read): every tensor of the
// GGUF corpus that ggml can dequantize, read and dequantized as its reads land,
// gives ggml's float32 hash; tensors as stored and dequantized ones mixed in
// one call; one batch, a batch per tensor and a few; float16 output equal to
// dequantize()'s; every refusal before any I/O (nothing written); Cancelled.
#include <catch2/catch.hpp>

#include <atomic>
#include <map>

#include "gguf_cases.hpp"
#include "read/dequantized_read.hpp"
#include "ringsafe/dequantize.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace ringsafe::test;

namespace {

std::uint64_t values_of(const tensor_info& t) { return dequantized_elements(t.ggml, t.size()).value(); }

}  // namespace

TEST_CASE("read_dequantized: the corpus's tensors give ggml's float32 hashes, in one batch or many") {
    for (const std::uint64_t staging : {std::uint64_t{256} << 20, std::uint64_t{1}, std::uint64_t{300}}) {
        for (const auto& c : load_gguf_cases(gguf_conformance_dir() / "valid")) {
            if (c.file.rfind("split_", 0) == 0) continue;  // the parts open as one set (their own test)
            reader r = reader::open(c.path.string());
            std::vector<read::dequantized_target> targets;
            std::vector<std::vector<std::byte>> out(c.tensors.size());
            for (std::uint32_t i = 0; i < c.tensors.size(); ++i) {
                const tensor_info& t = r.tensors()[i];
                const bool values = c.tensors[i].dequant_f32_sha256.has_value();
                out[i].resize(values ? values_of(t) * 4 : t.size());
                targets.push_back({i, out[i], values ? std::optional(dtype::F32) : std::nullopt});
            }
            read::read_dequantized(r, targets, {0, staging});
            for (std::uint32_t i = 0; i < c.tensors.size(); ++i) {
                INFO(c.file << " " << c.tensors[i].name << " staging " << staging);
                CHECK(sha256_hex(out[i]) == c.tensors[i].dequant_f32_sha256.value_or(c.tensors[i].sha256));
            }
        }
    }
}

TEST_CASE("read_dequantized: float16 values are dequantize()'s; refusals come before any I/O; Cancelled") {
    const auto dir = gguf_conformance_dir() / "valid";
    reader r = reader::open((dir / "type_Q4_K.gguf").string());
    const tensor_info& t = r.tensors()[0];
    std::vector<std::byte> blocks(t.size()), want(values_of(t) * 2), got(values_of(t) * 2, std::byte{0x5a});
    r.read(r.select({t.name}), std::vector<std::span<std::byte>>{blocks});
    dequantize(t.ggml, blocks, dtype::F16, want, 1);
    const read::dequantized_target one{0, got, dtype::F16};
    read::read_dequantized(r, std::span(&one, 1));
    CHECK(got == want);

    const std::vector<std::byte> untouched(got.size(), std::byte{0x5a});
    const auto refused = [&](read::dequantized_target d, errc kind, const std::string& says) {
        got.assign(untouched.begin(), untouched.end());
        const error e = expect_error([&] { read::read_dequantized(r, std::span(&d, 1)); });
        CHECK(e.code() == kind);
        CHECK_THAT(e.what(), Catch::Contains(says));
        CHECK(got == untouched);
    };
    refused({0, std::span(got).first(got.size() - 1), dtype::F16}, errc::BufferTooSmall, "'" + t.name + "' (Q4_K)");
    refused({0, got, dtype::I8}, errc::InvalidArgument, "F32, F16 or BF16, not I8");
    refused({1000, got, dtype::F16}, errc::InvalidArgument, "tensor index 1000 out of range");
    const read::dequantized_target twice[] = {{0, got, dtype::F16}, {0, got, dtype::F16}};
    CHECK_THAT(expect_error([&] { read::read_dequantized(r, twice); }).what(), Catch::Contains("given twice"));

    reader q81 = reader::open((dir / "type_Q8_1.gguf").string());
    std::vector<std::byte> any(1 << 16);
    const read::dequantized_target q{0, any, dtype::F32};
    const error e = expect_error([&] { read::read_dequantized(q81, std::span(&q, 1)); });
    CHECK(e.code() == errc::InvalidArgument);
    CHECK_THAT(e.what(), Catch::Contains("(Q8_1): ringsafe cannot dequantize this type"));

    std::atomic<bool> cancel{true};
    read_control ctl;
    ctl.cancel = &cancel;
    CHECK(expect_error([&] { read::read_dequantized(r, std::span(&one, 1), {}, ctl); }).code() == errc::Cancelled);
}
