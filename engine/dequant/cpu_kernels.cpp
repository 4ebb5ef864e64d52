// Which build of the kernels this process runs: the AVX2 build where the CPU
// has AVX2 (x86-64 only), else the portable one; the environment's
// RINGSAFE_DEQUANT_KERNELS=portable picks the portable one anyway (tests and
// benchmarks run both builds on one machine).
#include <cstdlib>
#include <cstring>

#include "dequant/kernels.hpp"

namespace ringsafe::dequant {
namespace portable {
kernel_table make_kernels() noexcept;
}
#if RINGSAFE_DEQUANT_HAVE_AVX2
namespace avx2 {
kernel_table make_kernels() noexcept;
}
#endif

namespace {
kernel_table choose() noexcept {
#if RINGSAFE_DEQUANT_HAVE_AVX2
    const char* forced = std::getenv("RINGSAFE_DEQUANT_KERNELS");
    if (forced != nullptr && std::strcmp(forced, "portable") == 0) return portable::make_kernels();
    if (__builtin_cpu_supports("avx2")) return avx2::make_kernels();
#endif
    return portable::make_kernels();
}
}  // namespace

const kernel_table& cpu_kernels() noexcept {
    static const kernel_table k = choose();
    return k;
}

}  // namespace ringsafe::dequant
