// How the async file-read engine's ring tells its CQEs apart, and the
// limits of one read (engine-internal; event_ring*.cpp).
#pragma once

#include <cstdint>

namespace ringsafe::uring {

// Reads: the slot id (below 4096) in the low half, the slot's generation in the high half.
inline std::uint64_t user_data(unsigned id, std::uint32_t gen) { return (std::uint64_t{gen} << 32) | id; }
// IORING_OP_ASYNC_CANCEL requests: all ones (their CQEs are ignored).
constexpr std::uint64_t cancel_marker = ~std::uint64_t{0};
// Single operations: this marker in the low half, a sequence number in the high half.
constexpr std::uint64_t single_low = 0xfffffffeu;
inline bool is_single(std::uint64_t ud) { return (ud & 0xffffffffu) == single_low; }

constexpr std::uint64_t max_read = 1u << 30;  // bytes per read: a CQE result is an int

}  // namespace ringsafe::uring
