// include/ringsafe/README.md's "Dequantizing GGUF tensors" example, run as
// written: the block below is the README's, character for character (checked).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "ringsafe/dequantize.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"
#include "test_support.hpp"

namespace {

std::string text_of(const std::filesystem::path& p) {
    std::ifstream in(p);
    REQUIRE(in);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The first ```cpp block of the section `heading`.
std::string readme_block(const std::string& page, const std::string& heading) {
    const auto at = page.find("\n" + heading + "\n");
    REQUIRE(at != std::string::npos);
    const auto begin = page.find("```cpp\n", at);
    REQUIRE(begin != std::string::npos);
    const auto end = page.find("```\n", begin + 7);
    return page.substr(begin + 7, end - begin - 7);
}

// The lines between this file's example markers, without their 4-space indentation.
std::string marked_block(const std::string& source) {
    const std::string open = "// README example begin\n", close = "    // README example end";
    const auto b = source.find(open) + open.size();
    const auto e = source.find(close, b);
    std::stringstream in(source.substr(b, e - b)), out;
    for (std::string line; std::getline(in, line);) out << (line.size() >= 4 ? line.substr(4) : line) << "\n";
    return out.str();
}

}  // namespace

TEST_CASE("the README's dequantization example runs as written") {
    const std::filesystem::path root = std::getenv("RINGSAFE_SOURCE_ROOT");
    CHECK(readme_block(text_of(root / "include/ringsafe/README.md"), "## Dequantizing GGUF tensors") ==
          marked_block(text_of(root / "tests/dequant/test_dequantize_readme.cpp")));

    // 8 Q8_0 blocks of scale 0.5 and values -16..15, and a file of three such tensors.
    std::vector<std::byte> q8_blocks(8 * 34);
    for (std::size_t b = 0; b < 8; ++b) {
        q8_blocks[34 * b] = std::byte{0x00}, q8_blocks[34 * b + 1] = std::byte{0x38};  // fp16 0.5
        for (int j = 0; j < 32; ++j) q8_blocks[34 * b + 2 + j] = std::byte(std::int8_t(j - 16 + int(b)));
    }
    ringsafe::test::temp_dir dir;
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir.path());
    {
        ringsafe::writer w("blocks.safetensors");
        for (const char* name : {"a", "b", "c"}) w.add(name, ringsafe::dtype::U8, {q8_blocks.size()}, q8_blocks);
        w.finish();
    }

    // README example begin
    #include <ringsafe/dequantize.hpp>

    using ringsafe::dtype, ringsafe::ggml_type;
    // One tensor: whole blocks of its ggml type in (8 Q8_0 blocks: an fp16 scale and 32 int8 each),
    // float32, float16 or bfloat16 out.
    const auto n = ringsafe::dequantized_elements(ggml_type::Q8_0, q8_blocks.size()).value();  // 256
    std::vector<std::uint16_t> bf16(n);
    ringsafe::dequantize(ggml_type::Q8_0, q8_blocks, dtype::BF16, std::as_writable_bytes(std::span(bf16)));

    // Overlapped with the reads: each tensor is queued as its bytes land (on_tensor_done, an I/O
    // thread) and dequantized on the engine's threads while later reads are in flight.
    auto r = ringsafe::reader::open("blocks.safetensors");   // here U8 tensors holding Q8_0 blocks
    auto sel = r.all();
    std::vector<std::vector<std::byte>> raw(sel.size()), values(sel.size());
    std::vector<std::span<std::byte>> dsts;
    for (std::size_t i = 0; i < sel.size(); ++i) {
        const auto& t = r.tensors()[sel.indices()[i]];
        raw[i].resize(t.size());
        values[i].resize(4 * ringsafe::dequantized_elements(ggml_type::Q8_0, t.size()).value());
        dsts.emplace_back(raw[i]);
    }
    ringsafe::dequantize_queue q;  // at most one thread per CPU
    ringsafe::read_control ctl;
    ctl.on_tensor_done = [&](std::size_t i, const ringsafe::tensor_info& t) {
        // A GGUF tensor says its type: t.ggml.
        q.submit({ggml_type::Q8_0, raw[i], dtype::F32, values[i], t.name, {}});
    };
    r.read(sel, dsts, ctl);
    q.wait();  // every tensor's values are in place
    // README example end

    std::filesystem::current_path(cwd);
    REQUIRE(n == 256);
    for (std::size_t b = 0; b < 8; ++b)
        for (int j = 0; j < 32; ++j) {
            const float v = 0.5f * float(j - 16 + int(b));
            std::uint32_t u;
            std::memcpy(&u, &v, 4);
            REQUIRE(bf16[32 * b + j] == std::uint16_t(u >> 16));  // exact in bfloat16
            for (const auto& vals : values) {
                float got;
                std::memcpy(&got, vals.data() + 4 * (32 * b + j), 4);
                REQUIRE(got == v);
            }
        }
}
