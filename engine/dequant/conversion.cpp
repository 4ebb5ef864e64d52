// Checking a dequantization and running a range of its blocks, through a
// float32 tile when the output is narrower or the destination unaligned.
#include "dequant/conversion.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>

namespace ringsafe::dequant {
namespace {

std::string subject(std::string_view name, ggml_type t) {
    std::string s = name.empty() ? std::string("dequantize") : "tensor '" + std::string(name) + "'";
    const std::string_view type = ggml_type_name(t);
    s += " (";
    s += type.empty() ? "type id " + std::to_string(static_cast<std::uint32_t>(t)) : std::string(type);
    return s + ")";
}

bool fail(status& st, errc e, std::string message) noexcept {
    st.code = make_error_code(e);
    st.message = std::move(message);
    return false;
}

// Elements of float32 the tile holds: 16 KiB, a whole number of any block.
constexpr std::size_t tile_elements = 4096;

}  // namespace

bool check_conversion(ggml_type t, std::size_t src_bytes, dtype out, std::size_t dst_bytes,
                      std::string_view name, conversion& c, status& st) noexcept {
    try {
        const auto id = static_cast<std::uint32_t>(t);
        const isa_kernels& k = cpu_kernels();
        const ggml_type_traits tr = ggml_traits(t);
        if (id >= ggml_type_count || k.table.to_f32[id] == nullptr)
            return fail(st, errc::InvalidArgument,
                        subject(name, t) + ": ringsafe cannot dequantize this type (it dequantizes F32, F16, "
                                           "BF16 and the block types but Q8_1)");
        if (out != dtype::F32 && out != dtype::F16 && out != dtype::BF16)
            return fail(st, errc::InvalidArgument,
                        subject(name, t) + ": cannot dequantize to " + std::string(dtype_name(out)) +
                            ": the output must be F32, F16 or BF16");
        if (src_bytes % tr.type_size != 0)
            return fail(st, errc::InvalidArgument,
                        subject(name, t) + ": " + std::to_string(src_bytes) + " bytes are not whole blocks of " +
                            std::to_string(tr.type_size) + " bytes (" + std::to_string(tr.block_size) +
                            " elements each)");
        c = {};
        c.kernel = k.table.to_f32[id];
        c.block_size = tr.block_size;
        c.type_size = tr.type_size;
        c.out_size = out == dtype::F32 ? 4 : 2;
        c.blocks = src_bytes / tr.type_size;
        c.copy = ggml_plain_dtype(t) == out;
        c.narrow = out == dtype::F16 ? k.to_f16 : out == dtype::BF16 ? k.to_bf16 : nullptr;
        // No overflow: the output is at most 4x the input's elements, which fit in memory.
        if (dst_bytes < c.out_bytes())
            return fail(st, errc::BufferTooSmall,
                        subject(name, t) + ": the destination holds " + std::to_string(dst_bytes) +
                            " bytes, dequantizing to " + std::string(dtype_name(out)) + " needs " +
                            std::to_string(c.out_bytes()));
        return true;
    } catch (...) {  // std::bad_alloc building a message
        return fail(st, errc::InvalidArgument, "dequantize: out of memory describing an error");
    }
}

void run_blocks(const conversion& c, const std::byte* src, std::byte* dst, std::uint64_t first,
                std::uint64_t count) noexcept {
    const auto* in = reinterpret_cast<const std::uint8_t*>(src) + first * c.type_size;
    std::byte* outp = dst + first * c.block_size * c.out_size;
    if (c.copy) {
        std::memcpy(outp, in, count * c.type_size);
        return;
    }
    if (c.narrow == nullptr && reinterpret_cast<std::uintptr_t>(outp) % alignof(float) == 0) {
        c.kernel(in, count, reinterpret_cast<float*>(outp));
        return;
    }
    alignas(64) float tile[tile_elements];
    const std::uint64_t per_tile = tile_elements / c.block_size;
    const bool aligned16 = reinterpret_cast<std::uintptr_t>(outp) % alignof(std::uint16_t) == 0;
    alignas(64) std::uint16_t narrow_tile[tile_elements];  // for an odd destination address
    for (std::uint64_t done = 0; done < count;) {
        const std::uint64_t n = std::min(per_tile, count - done);
        const std::size_t elements = n * c.block_size;
        c.kernel(in + done * c.type_size, n, tile);
        std::byte* o = outp + done * c.block_size * c.out_size;
        if (c.narrow == nullptr) {
            std::memcpy(o, tile, elements * sizeof(float));
        } else if (aligned16) {
            c.narrow(tile, elements, reinterpret_cast<std::uint16_t*>(o));
        } else {
            c.narrow(tile, elements, narrow_tile);
            std::memcpy(o, narrow_tile, elements * sizeof(std::uint16_t));
        }
        done += n;
    }
}

std::uint64_t piece_blocks(const conversion& c, unsigned threads) noexcept {
    constexpr std::uint64_t min_piece = 256 << 10, max_piece = 16 << 20;
    const std::uint64_t block_out = std::uint64_t{c.block_size} * c.out_size;
    const std::uint64_t wanted = std::clamp(c.out_bytes() / (std::uint64_t{threads} * 4), min_piece, max_piece);
    return std::max<std::uint64_t>(1, wanted / block_out);
}

unsigned thread_count(unsigned threads) noexcept {
    if (threads != 0) return threads;
    static const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
    return cpus;
}

}  // namespace ringsafe::dequant
