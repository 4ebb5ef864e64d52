// dequantize(): one tensor, on the caller and (when large) a few pool threads
// taking pieces from a shared counter.
#include "ringsafe/dequantize.hpp"

#include <algorithm>
#include <atomic>

#include "dequant/conversion.hpp"
#include "uring/worker_threads.hpp"

namespace ringsafe {

bool can_dequantize(ggml_type t) noexcept {
    return dequant::cpu_kernels().get(static_cast<std::uint32_t>(t), dequant::output::f32) != nullptr;
}

std::optional<std::uint64_t> dequantized_elements(ggml_type t, std::uint64_t block_bytes) noexcept {
    const ggml_type_traits tr = ggml_traits(t);
    if (tr.type_size == 0 || block_bytes % tr.type_size != 0) return std::nullopt;
    return block_bytes / tr.type_size * tr.block_size;
}

bool dequantize(ggml_type t, std::span<const std::byte> blocks, dtype out, std::span<std::byte> dst,
                unsigned threads, status& st) noexcept {
    st.clear();
    dequant::conversion c;
    if (!dequant::check_conversion(t, blocks.size(), out, dst.size(), {}, c, st)) return false;
    const unsigned n_threads = dequant::thread_count(threads);
    const std::uint64_t per_piece = dequant::piece_blocks(c, n_threads);
    const std::uint64_t pieces = (c.blocks + per_piece - 1) / per_piece;
    std::atomic<std::uint64_t> next{0};
    auto work = [&]() noexcept {
        for (std::uint64_t p; (p = next.fetch_add(1, std::memory_order_relaxed)) < pieces;) {
            const std::uint64_t first = p * per_piece;
            dequant::run_blocks(c, blocks.data(), dst.data(), first, std::min(per_piece, c.blocks - first));
        }
    };
    {
        // Helpers that find no piece left return at once; one that cannot be
        // started leaves its share to the others and the caller.
        uring::thread_group helpers;
        const std::uint64_t n_helpers = std::min<std::uint64_t>(n_threads, pieces) - (pieces > 0 ? 1 : 0);
        for (std::uint64_t i = 0; i < n_helpers; ++i)
            if (!helpers.start(work)) break;
        work();
    }  // ~thread_group waits for the helpers
    return true;
}

void dequantize(ggml_type t, std::span<const std::byte> blocks, dtype out, std::span<std::byte> dst,
                unsigned threads) {
    status st;
    if (!dequantize(t, blocks, out, dst, threads, st)) raise(st.code, st.message);
}

}  // namespace ringsafe
