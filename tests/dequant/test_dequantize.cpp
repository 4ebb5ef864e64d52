// Tests for include/ringsafe/dequantize.hpp's dequantize(): the float32 values
// of every type_*.gguf of ../shared/conformance-gguf against ggml's hashes, the
// float16/bfloat16 outputs against an independent rounding of those values,
// the threaded and unaligned paths against the plain one, and the named errors
// (with nothing written outside, or at all in, the caller's buffer).
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "ringsafe/dequantize.hpp"
#include "test_support.hpp"

using namespace ringsafe;

namespace {

// One tensor of a type_*.gguf as the corpus records it.
struct corpus_tensor {
    std::string file, type;
    std::vector<std::byte> blocks;
    std::string f32_sha256;  // empty when ggml has no dequantizer for the type
};

// Reads each type_ file's tensor by the numbers expected.jsonl records
// (data_offset + offset, nbytes): no GGUF parser needed.
std::vector<corpus_tensor> corpus_tensors() {
    const auto dir = test::shared_dir() / "conformance-gguf" / "valid";
    std::ifstream in(dir / "expected.jsonl");
    REQUIRE(in);
    std::vector<corpus_tensor> out;
    for (std::string line; std::getline(in, line);) {
        const auto c = boost::json::parse(line).as_object();
        const std::string file(c.at("file").as_string());
        if (file.rfind("type_", 0) != 0) continue;
        const auto data_offset = c.at("data_offset").to_number<std::uint64_t>();
        const auto bytes = test::read_file(dir / file);
        for (const auto& tv : c.at("tensors").as_array()) {
            const auto& t = tv.as_object();
            const auto begin = data_offset + t.at("offset").to_number<std::uint64_t>();
            const auto n = t.at("nbytes").to_number<std::uint64_t>();
            REQUIRE(begin + n <= bytes.size());
            corpus_tensor ct{file, std::string(t.at("type").as_string()),
                             {bytes.begin() + std::ptrdiff_t(begin), bytes.begin() + std::ptrdiff_t(begin + n)},
                             {}};
            if (t.at("dequant_f32_sha256").is_string()) ct.f32_sha256 = t.at("dequant_f32_sha256").as_string();
            out.push_back(std::move(ct));
        }
    }
    return out;
}

std::vector<float> dequantize_f32(ggml_type t, std::span<const std::byte> blocks, unsigned threads = 1) {
    std::vector<float> out(dequantized_elements(t, blocks.size()).value());
    dequantize(t, blocks, dtype::F32, std::as_writable_bytes(std::span(out)), threads);
    return out;
}

// Nearest-even float16 and bfloat16 of a float32, in double arithmetic: an
// oracle independent of the engine's bit tricks. NaN: as the engine makes it.
std::uint16_t reference_f16(float f) {
    const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    if (std::isnan(f)) return sign | 0x7e00;
    const double a = std::fabs(double(f));
    if (a >= 65520.0) return sign | 0x7c00;  // rounds past the largest float16, 65504
    if (a < std::ldexp(1.0, -14)) return sign | std::uint16_t(std::nearbyint(a / std::ldexp(1.0, -24)));
    int e;
    std::frexp(a, &e);  // a = m x 2^e, m in [0.5, 1)
    const int exp = e - 1;
    const auto m = static_cast<std::uint32_t>(std::nearbyint(a / std::ldexp(1.0, exp - 10)));  // 1024..2048
    return sign | std::uint16_t(((exp + 15) << 10) + (m - 1024));
}

std::uint16_t reference_bf16(float f) {
    if (std::isnan(f)) return 0x7fc0;
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    const double a = std::fabs(double(f));
    // The two bfloat16 neighbours of f, and the nearer (the even one on a tie).
    const std::uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    float flo, fhi;
    std::memcpy(&flo, &lo, 4);
    std::memcpy(&fhi, &hi, 4);
    // Past the largest finite value the next step up is infinity, at 2^128 for rounding.
    const double vhi = std::isinf(fhi) ? std::ldexp(1.0, 128) : std::fabs(double(fhi));
    const double dlo = a - std::fabs(double(flo)), dhi = vhi - a;
    if ((u & 0xffffu) == 0) return std::uint16_t(u >> 16);
    const bool up = dhi < dlo || (dhi == dlo && ((lo >> 16) & 1));
    return std::uint16_t((up ? hi : lo) >> 16);
}

template <class Fn>
std::vector<std::uint16_t> narrowed(const std::vector<float>& values, Fn ref) {
    std::vector<std::uint16_t> out(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) out[i] = ref(values[i]);
    return out;
}

std::vector<std::uint16_t> dequantize_u16(ggml_type t, std::span<const std::byte> blocks, dtype out,
                                          unsigned threads = 1) {
    std::vector<std::uint16_t> v(dequantized_elements(t, blocks.size()).value());
    dequantize(t, blocks, out, std::as_writable_bytes(std::span(v)), threads);
    return v;
}

// Bytes of a tensor of `t`, `blocks` blocks, with finite moderate values: the
// corpus's own blocks repeated, so every scale stays as the corpus set it.
std::vector<std::byte> repeated_corpus_blocks(const corpus_tensor& c, std::size_t copies) {
    std::vector<std::byte> out;
    for (std::size_t i = 0; i < copies; ++i) out.insert(out.end(), c.blocks.begin(), c.blocks.end());
    return out;
}

}  // namespace

TEST_CASE("the float32 values of every type_*.gguf hash as ggml's dequantizer's do") {
    int checked = 0;
    for (const auto& c : corpus_tensors()) {
        INFO(c.file << " (" << c.type << ")");
        const auto t = ggml_type_from_name(c.type);
        REQUIRE(t);
        if (c.f32_sha256.empty()) {
            // ggml has no dequantizer: F32 (the values as they are), F64, the integers, Q8_1.
            if (*t == ggml_type::F32) CHECK(can_dequantize(*t));
            else CHECK_FALSE(can_dequantize(*t));
            continue;
        }
        REQUIRE(can_dequantize(*t));
        const auto values = dequantize_f32(*t, c.blocks);
        CHECK(test::sha256_hex(std::as_bytes(std::span(values))) == c.f32_sha256);
        ++checked;
    }
    // Every type ggml dequantizes: F16, BF16 and 26 block types.
    CHECK(checked == 28);
}

TEST_CASE("float16 and bfloat16 outputs are the float32 values rounded to nearest even") {
    for (const auto& c : corpus_tensors()) {
        const auto t = *ggml_type_from_name(c.type);
        if (!can_dequantize(t)) continue;
        INFO(c.file << " (" << c.type << ")");
        const auto values = dequantize_f32(t, c.blocks);
        CHECK(dequantize_u16(t, c.blocks, dtype::F16) == narrowed(values, reference_f16));
        CHECK(dequantize_u16(t, c.blocks, dtype::BF16) == narrowed(values, reference_bf16));
    }
}

TEST_CASE("narrowing rounds ties to even, saturates to infinity, keeps subnormals, NaN and signed zeros") {
    const float inf = INFINITY;
    const std::vector<float> values = {
        0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e9f, inf, -inf, NAN, -NAN,
        std::ldexp(1.0f, -14), std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(1.5f, -25),
        std::ldexp(1.0f, -26), std::ldexp(3.0f, -24), 1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11),
        1.0f + std::ldexp(1.0f, -8), 1.0f + std::ldexp(3.0f, -8), 3.4028235e38f, -3.4028235e38f, 1e-40f, -1e-45f,
        std::ldexp(1.0f, -15) * 1.75f, 0.1f, -2.7182817f, 3.1415927f};
    const auto bytes = std::as_bytes(std::span(values));
    CHECK(dequantize_u16(ggml_type::F32, bytes, dtype::F16) == narrowed(values, reference_f16));
    CHECK(dequantize_u16(ggml_type::F32, bytes, dtype::BF16) == narrowed(values, reference_bf16));
    // Every float16 widens exactly and narrows back to itself (NaNs to the quiet one of their sign).
    std::vector<std::uint16_t> all(65536);
    for (std::uint32_t i = 0; i < all.size(); ++i) all[i] = std::uint16_t(i);
    const auto wide = dequantize_f32(ggml_type::F16, std::as_bytes(std::span(all)));
    const auto back = dequantize_u16(ggml_type::F16, std::as_bytes(std::span(all)), dtype::F16);
    CHECK(back == all);  // same type in and out: the bytes as they are
    const auto round_trip = dequantize_u16(ggml_type::F32, std::as_bytes(std::span(wide)), dtype::F16);
    for (std::uint32_t i = 0; i < all.size(); ++i) {
        const bool nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff) != 0;
        if (nan) REQUIRE(round_trip[i] == ((i & 0x8000) | 0x7e00));
        else REQUIRE(round_trip[i] == i);
    }
}

TEST_CASE("threads, pieces and unaligned destinations give the single-thread values") {
    for (const auto& c : corpus_tensors()) {
        const auto t = *ggml_type_from_name(c.type);
        if (!can_dequantize(t)) continue;
        INFO(c.file << " (" << c.type << ")");
        // About 2 MiB of float32: several pieces.
        const std::size_t copies = std::max<std::size_t>(1, (2u << 20) / (4 * dequantized_elements(t, c.blocks.size()).value()));
        const auto blocks = repeated_corpus_blocks(c, copies);
        const auto one = dequantize_f32(t, blocks, 1);
        CHECK(dequantize_f32(t, blocks, 4) == one);
        CHECK(dequantize_f32(t, blocks, 0) == one);
        for (const dtype out : {dtype::F32, dtype::F16, dtype::BF16}) {
            const std::size_t size = one.size() * (out == dtype::F32 ? 4 : 2);
            std::vector<std::byte> aligned(size), odd(size + 1);
            dequantize(t, blocks, out, aligned, 3);
            dequantize(t, std::span(blocks).subspan(0), out, std::span(odd).subspan(1), 3);
            CHECK(std::memcmp(aligned.data(), odd.data() + 1, size) == 0);
        }
    }
}

TEST_CASE("what cannot be dequantized is a named error before anything is written") {
    std::vector<std::byte> dst(4096, std::byte{0x5a});
    const std::vector<std::byte> dst_before = dst;
    const std::vector<std::byte> blocks(34 * 4, std::byte{0x11});

    for (const ggml_type t : {ggml_type::Q8_1, ggml_type::I8, ggml_type::I16, ggml_type::I32, ggml_type::I64,
                              ggml_type::F64, ggml_type::none, ggml_type(4), ggml_type(31), ggml_type(99)}) {
        INFO(static_cast<std::uint32_t>(t));
        CHECK_FALSE(can_dequantize(t));
        auto e = test::expect_error([&] { dequantize(t, std::span(blocks).first(36), dtype::F32, dst); });
        CHECK(e.code() == make_error_code(errc::InvalidArgument));
        const std::string name(ggml_type_name(t));
        CHECK_THAT(e.what(), Catch::Contains(name.empty() ? "type id " + std::to_string(static_cast<std::uint32_t>(t))
                                                          : "(" + name + ")"));
        CHECK_THAT(e.what(), Catch::Contains("cannot dequantize"));
    }
    auto e = test::expect_error([&] { dequantize(ggml_type::Q8_0, blocks, dtype::I32, dst); });
    CHECK(e.code() == make_error_code(errc::InvalidArgument));
    CHECK_THAT(e.what(), Catch::Contains("I32") && Catch::Contains("F32, F16 or BF16"));

    e = test::expect_error([&] { dequantize(ggml_type::Q8_0, std::span(blocks).first(35), dtype::F32, dst); });
    CHECK(e.code() == make_error_code(errc::InvalidArgument));
    CHECK_THAT(e.what(), Catch::Contains("(Q8_0)") && Catch::Contains("35 bytes") && Catch::Contains("34 bytes"));

    // 4 blocks of 32: 512 bytes of float32, 256 of bfloat16.
    e = test::expect_error([&] { dequantize(ggml_type::Q8_0, blocks, dtype::F32, std::span(dst).first(511)); });
    CHECK(e.code() == make_error_code(errc::BufferTooSmall));
    CHECK_THAT(e.what(), Catch::Contains("511") && Catch::Contains("512"));
    status st;
    CHECK_FALSE(dequantize(ggml_type::Q8_0, blocks, dtype::BF16, std::span(dst).first(255), 1, st));
    CHECK(st.code == make_error_code(errc::BufferTooSmall));
    CHECK(dst == dst_before);

    // A larger destination: exactly the output's bytes are written.
    dequantize(ggml_type::Q8_0, blocks, dtype::BF16, std::span(dst).subspan(1, 300), 1, st);
    REQUIRE(st.ok());
    CHECK(dst[0] == std::byte{0x5a});
    for (std::size_t i = 257; i < dst.size(); ++i) REQUIRE(dst[i] == std::byte{0x5a});
    // An empty tensor writes nothing and is fine.
    CHECK(dequantize(ggml_type::Q4_K, {}, dtype::F32, {}, 0, st));
    CHECK(dequantized_elements(ggml_type::Q4_K, 144 * 3) == 768u);
    CHECK_FALSE(dequantized_elements(ggml_type::Q4_K, 145));
    CHECK_FALSE(dequantized_elements(ggml_type(5), 0));
}
