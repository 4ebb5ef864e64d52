// Checking a dequantization and running a range of its blocks, through a
// small tile when the destination is not aligned to the output's size.
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

// Bytes of the tile for unaligned destinations: whole blocks of every type and output.
constexpr std::size_t tile_bytes = 16 << 10;

}  // namespace

bool check_conversion(ggml_type t, std::size_t src_bytes, dtype out, std::size_t dst_bytes,
                      std::string_view name, conversion& c, status& st) noexcept {
    try {
        const auto id = static_cast<std::uint32_t>(t);
        const kernel_table& k = cpu_kernels();
        const ggml_type_traits tr = ggml_traits(t);
        if (k.get(id, output::f32) == nullptr)
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
        c.kernel = k.get(id, out == dtype::F32 ? output::f32 : out == dtype::F16 ? output::f16 : output::bf16);
        c.block_size = tr.block_size;
        c.type_size = tr.type_size;
        c.out_size = out == dtype::F32 ? 4 : 2;
        c.blocks = src_bytes / tr.type_size;
        c.copy = ggml_plain_dtype(t) == out;
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
    const std::uint64_t block_out = std::uint64_t{c.block_size} * c.out_size;
    std::byte* out = dst + first * block_out;
    if (c.copy) {
        std::memcpy(out, in, count * c.type_size);
    } else if (reinterpret_cast<std::uintptr_t>(out) % c.out_size == 0) {
        c.kernel(in, count, out);
    } else {
        alignas(64) std::byte tile[tile_bytes];
        const std::uint64_t per_tile = tile_bytes / block_out;
        for (std::uint64_t done = 0; done < count; done += per_tile) {
            const std::uint64_t n = std::min(per_tile, count - done);
            c.kernel(in + done * c.type_size, n, tile);
            std::memcpy(out + done * block_out, tile, n * block_out);
        }
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
