// What a ring does with work io-wq refused (engine-internal): io-wq runs what a
// ring cannot do inline (IOSQE_ASYNC reads, reads a filesystem cannot do without
// blocking) on kernel threads, which count against RLIMIT_NPROC as any thread
// does. When it cannot start one it cancels the queued work (-ECANCELED), after
// a backoff, every time it is resubmitted: the operation is then done on the
// ring's own thread with pread(2).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringsafe::uring {

// One pread(2) of [offset, offset + len) on the calling thread, EINTR retried:
// the bytes read (possibly fewer) or -errno, as a CQE's res.
int read_here(int fd, std::byte* buf, std::uint32_t len, std::uint64_t offset) noexcept;

}  // namespace ringsafe::uring
