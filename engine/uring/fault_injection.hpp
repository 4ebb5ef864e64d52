// Engine-internal test hook at the io_uring executor's completion edge.
//
// A test installs a function that sees each completion before the executor
// does and returns the result to use instead: a shorter count (short read),
// -EAGAIN, -EINTR, -EIO, ... Only the result is rewritten; the bytes the
// kernel wrote stay where they are, so a test that shortens a read should
// also overwrite the bytes past the new count (event.buffer) to make the
// executor prove it reads them again.
// The hook runs on executor worker threads, possibly concurrently: it must be
// thread-safe. Not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace ringsafe::uring {

// What one completion was for.
struct completion_event {
    std::uint64_t file_offset = 0;  // where this read started
    std::uint64_t requested = 0;    // bytes it asked for
    std::uint32_t tag = 0;          // the read_op's tag
    std::byte* buffer = nullptr;    // where this read's bytes landed (caller or bounce memory)
    bool direct = false;            // an O_DIRECT read (a shortened count should stay aligned)
    unsigned ring = 0;              // which worker ring read it (0 = the calling thread's)
    bool punted = false;            // it was submitted with IOSQE_ASYNC
};

// Given the event and the kernel's result, returns the result to act on.
using completion_fault = std::function<int(const completion_event& ev, int res)>;

// Installs `fault` for every following completion (an empty function removes it).
void set_completion_fault(completion_fault fault);

// Applies the installed fault, if any (the executor calls this for each completion).
int apply_completion_fault(const completion_event& ev, int res);

// Installs a fault for the lifetime of a scope.
class scoped_completion_fault {
public:
    explicit scoped_completion_fault(completion_fault fault) { set_completion_fault(std::move(fault)); }
    ~scoped_completion_fault() { set_completion_fault({}); }
    scoped_completion_fault(const scoped_completion_fault&) = delete;
    scoped_completion_fault& operator=(const scoped_completion_fault&) = delete;
};

}  // namespace ringsafe::uring
