// The eventfd that lets an event loop wait for a ring's completions: made
// once here for every ring that is driven that way (event_ring, and the
// writer's write_ring through write_ring::attach_eventfd).
#pragma once

#include <string>

struct io_uring;  // liburing's ring (only its address is passed here)

namespace ringsafe::uring {

// A non-blocking, close-on-exec eventfd. Throws ringsafe::error
// (system_category) naming `who` ("<who>: eventfd").
int open_eventfd(const std::string& who);
// Has `ring` signal `efd` on every completion. Throws naming
// `what` (the whole message) when io_uring_register_eventfd fails.
void register_eventfd(io_uring& ring, int efd, const std::string& what);
// Resets the counter (before reaping, so that a later completion signals again).
void consume_eventfd(int efd) noexcept;

}  // namespace ringsafe::uring
