// The async front end's edge of the event ring (engine-internal): the
// ring's eventfd wrapped in an Asio descriptor on a strand, and the ring's
// deferred callbacks posted to that strand.
#pragma once

#include <memory>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/strand.hpp>

#include "uring/event_ring.hpp"

namespace ringsafe::asio::detail {

using engine_strand = boost::asio::strand<boost::asio::any_io_executor>;

// An event ring (`depth` reads in flight) whose every call and callback runs
// on `strand`. Destroying the strand's execution context shuts the ring down
// (uring::event_ring::shutdown): what waits on it is destroyed, never run.
// Throws as uring::event_ring's constructor.
std::shared_ptr<uring::event_ring> make_event_ring(const engine_strand& strand, unsigned depth);

}  // namespace ringsafe::asio::detail
