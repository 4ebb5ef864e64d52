// Non-temporal copies out of the page cache (stream_copy.hpp).
#include "file/stream_copy.hpp"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace ringsafe::file {

void stream_copy(std::byte* dst, const std::byte* src, std::uint64_t n) {
#if defined(__SSE2__)
    if (n >= stream_min_bytes) {
        const std::uint64_t head = (64 - reinterpret_cast<std::uintptr_t>(dst) % 64) % 64;
        std::memcpy(dst, src, head);
        dst += head, src += head, n -= head;
        auto* d = reinterpret_cast<__m128i*>(dst);
        const auto* s = reinterpret_cast<const __m128i*>(src);
        for (std::uint64_t i = 0; i < n / 64; ++i, d += 4, s += 4) {
            const __m128i a = _mm_loadu_si128(s), b = _mm_loadu_si128(s + 1);
            const __m128i c = _mm_loadu_si128(s + 2), e = _mm_loadu_si128(s + 3);
            _mm_stream_si128(d, a);
            _mm_stream_si128(d + 1, b);
            _mm_stream_si128(d + 2, c);
            _mm_stream_si128(d + 3, e);
        }
        _mm_sfence();  // the stores are weakly ordered: visible before the piece counts as done
        const std::uint64_t done = n / 64 * 64;
        std::memcpy(dst + done, src + done, n - done);
        return;
    }
#endif
    std::memcpy(dst, src, n);
}

}  // namespace ringsafe::file
