// libFuzzer target: dequantize() on arbitrary blocks of every ggml type id, to
// every output, into a destination between guard zones (at an odd address now
// and then). Input: a type id byte, a flags byte, then the blocks (seeds: the
// GGUF corpus's tensors, tests/fuzz/seeds/dequant). Besides "no crash, no UB,
// no read past the blocks": nothing is written outside the output's bytes, the
// threaded path (the blocks repeated into a tensor of several pieces) and
// dequantize_queue give the single-thread values, and a type it cannot take, a
// partial block or a short destination is a named error that writes nothing.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz_check.hpp"
#include "ringsafe/dequantize.hpp"

namespace {

using ringsafe::dtype;
using ringsafe::ggml_type;

constexpr std::size_t guard = 64;
constexpr std::byte guard_byte{0xa5};

// A destination of `size` bytes at offset `skew` (0 or 1) inside guard zones.
struct guarded {
    std::vector<std::byte> mem;
    std::size_t skew, size;
    guarded(std::size_t n, std::size_t s) : mem(2 * guard + n + 1, guard_byte), skew(s), size(n) {}
    std::span<std::byte> dst() { return std::span(mem).subspan(guard + skew, size); }
    bool guards_intact() const {
        for (std::size_t i = 0; i < mem.size(); ++i)
            if ((i < guard + skew || i >= guard + skew + size) && mem[i] != guard_byte) return false;
        return true;
    }
    bool untouched() const {
        return std::all_of(mem.begin(), mem.end(), [](std::byte b) { return b == guard_byte; });
    }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 2) return 0;
    const auto t = ggml_type(data[0] % ringsafe::ggml_type_count);
    const dtype out = data[1] % 3 == 0 ? dtype::F32 : data[1] % 3 == 1 ? dtype::F16 : dtype::BF16;
    const std::size_t skew = (data[1] >> 2) & 1;
    const bool threaded = ((data[1] >> 5) & 3) == 3;  // a quarter of the inputs: the slow path
    const bool short_dst = (data[1] >> 4) & 1;
    const std::size_t out_size = out == dtype::F32 ? 4 : 2;
    const auto tr = ringsafe::ggml_traits(t);
    if (!ringsafe::can_dequantize(t)) {
        guarded g(4096, skew);
        ringsafe::status st;
        FUZZ_CHECK(!ringsafe::dequantize(t, std::as_bytes(std::span(data, size)), out, g.dst(), 1, st));
        FUZZ_CHECK(st.code == ringsafe::make_error_code(ringsafe::errc::InvalidArgument));
        FUZZ_CHECK(g.untouched());
        return 0;
    }
    // The blocks in a heap copy of their exact size: ASan sees any read past them.
    const std::vector<std::byte> blocks(reinterpret_cast<const std::byte*>(data) + 2,
                                        reinterpret_cast<const std::byte*>(data) + size);
    const bool whole = blocks.size() % tr.type_size == 0;
    const std::size_t n_out = whole ? blocks.size() / tr.type_size * tr.block_size * out_size : 0;

    if (!whole || (short_dst && n_out > 0)) {
        guarded g(short_dst && n_out > 0 ? n_out - 1 : 4096, skew);
        ringsafe::status st;
        FUZZ_CHECK(!ringsafe::dequantize(t, blocks, out, g.dst(), 1, st));
        FUZZ_CHECK(st.code == ringsafe::make_error_code(whole ? ringsafe::errc::BufferTooSmall
                                                              : ringsafe::errc::InvalidArgument));
        FUZZ_CHECK(g.untouched());
        return 0;
    }

    guarded one(n_out, skew);
    ringsafe::dequantize(t, blocks, out, one.dst(), 1);
    FUZZ_CHECK(one.guards_intact());
    if (!threaded || blocks.empty()) return 0;

    // The blocks repeated into ~768 KiB of output: several pieces on several threads.
    const std::size_t copies = std::max<std::size_t>(2, (768u << 10) / n_out);
    std::vector<std::byte> big;
    big.reserve(copies * blocks.size());
    for (std::size_t i = 0; i < copies; ++i) big.insert(big.end(), blocks.begin(), blocks.end());
    guarded many(copies * n_out, skew), queued(copies * n_out, 1 - skew);
    ringsafe::dequantize(t, big, out, many.dst(), 3);
    {
        ringsafe::dequantize_queue q(2);
        q.submit({t, big, out, queued.dst(), "fuzz", {}});
        q.wait();
    }
    FUZZ_CHECK(many.guards_intact() && queued.guards_intact());
    for (std::size_t i = 0; i < copies; ++i) {
        FUZZ_CHECK(std::memcmp(many.dst().data() + i * n_out, one.dst().data(), n_out) == 0);
        FUZZ_CHECK(std::memcmp(queued.dst().data() + i * n_out, one.dst().data(), n_out) == 0);
    }
    return 0;
}
