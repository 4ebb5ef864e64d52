// One tensor's dequantization, checked and cut into pieces (engine-internal):
// what dequantize() and dequantize_queue share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "dequant/kernels.hpp"
#include "ringsafe/dtype.hpp"
#include "ringsafe/error.hpp"
#include "ringsafe/ggml_type.hpp"

namespace ringsafe::dequant {

// A checked dequantization of `blocks` whole blocks.
struct conversion {
    kernel_fn kernel = nullptr;  // to the output
    bool copy = false;           // input and output are the same type: the bytes as they are
    std::uint32_t block_size = 0, type_size = 0, out_size = 0;  // elements/block, bytes/block, bytes/element
    std::uint64_t blocks = 0;
    std::uint64_t out_bytes() const noexcept { return blocks * block_size * out_size; }
};

// Checks a dequantization of `src` (type `t`) into `dst` as `out`, before
// anything is written: false and `st` filled (InvalidArgument for a type it
// cannot dequantize, an output that is not F32/F16/BF16 or blocks that are not
// whole; BufferTooSmall), naming `name` (a tensor; may be empty) and the type.
bool check_conversion(ggml_type t, std::size_t src_bytes, dtype out, std::size_t dst_bytes,
                      std::string_view name, conversion& c, status& st) noexcept;

// Dequantizes blocks [first, first + count) of `src` into their place in `dst`.
void run_blocks(const conversion& c, const std::byte* src, std::byte* dst, std::uint64_t first,
                std::uint64_t count) noexcept;

// Blocks per piece when `threads` threads share the conversion: a few pieces
// per thread, of 256 KiB to 16 MiB of output (a small tensor is one piece; a
// waiter that helps comes back within one piece's time).
std::uint64_t piece_blocks(const conversion& c, unsigned threads) noexcept;

// `threads` as given, or (0) the number of CPUs.
unsigned thread_count(unsigned threads) noexcept;

}  // namespace ringsafe::dequant
