// event_ring, O_DIRECT: where each piece of a read goes (the caller's buffer
// or the slot's bounce buffer) and how many of the bytes read are wanted.
#include <algorithm>

#include "format/alignment.hpp"
#include "uring/direct_split.hpp"
#include "uring/event_ring.hpp"
#include "uring/event_ring_user_data.hpp"

namespace ringsafe::uring {

// O_DIRECT: the next piece of the slot's op from s.pos on (split_direct). An
// aligned position with an aligned destination reads the aligned run of whole blocks
// straight into the caller's buffer; anything else (an unaligned head, a tail
// shorter than a block, a misaligned destination) reads whole blocks into the
// slot's bounce buffer, and handle() copies out the wanted bytes. Blocks past
// the end of the file come back short: only bytes before EOF are wanted.
std::byte* event_ring::place_direct(unsigned id) {
    slot& s = slots_[id];
    const file_job& j = *s.job;
    const read_op& op = j.ops[s.op];
    const std::uint64_t a = j.align;
    const std::uint64_t end = op.offset + op.length;
    std::byte* dst = op.dst + (s.pos - op.offset);
    const direct_split split = split_direct(s.pos, end, a);
    if (split.head_end == s.pos && split.mid_end > s.pos && reinterpret_cast<std::uintptr_t>(dst) % j.mem_align == 0) {
        s.read_at = s.pos;
        s.read_len = std::min(split.mid_end - s.pos, format::align_down(max_read, a));
        s.bounced = false;
        return dst;
    }
    s.read_at = format::align_down(s.pos, a);
    s.read_len = std::min<std::uint64_t>(bounce_size, format::align_up(end - s.read_at, a));
    s.bounced = true;
    return bounces_[id].get();
}

// Of a read that returned `res` bytes, how many are wanted bytes of the op at
// s.pos (a bounced O_DIRECT read starts before s.pos and may run past the op).
std::uint64_t event_ring::wanted_bytes(const slot& s, const read_op& op, int res) {
    if (res <= 0) return 0;
    if (!s.bounced) return static_cast<std::uint64_t>(res);
    const std::uint64_t upto =
        std::min({s.read_at + static_cast<std::uint64_t>(res), s.read_at + s.read_len, op.offset + op.length});
    return upto > s.pos ? upto - s.pos : 0;
}

}  // namespace ringsafe::uring
