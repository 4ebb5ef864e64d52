// The operations an async_writer queues (engine-internal): async_write copies
// a tensor into the writer's staging, async_finish flushes and publishes
// through ring operations (writer_state.hpp has their interface).
#pragma once

#include <memory>
#include <optional>

#include "asio/writer_state.hpp"

namespace ringsafe::asio::detail {

// writer::add on the event-driven path: validation first (the same errors,
// the writer stays usable), then the bytes are copied into staging blocks as
// they free up; done once the last byte is copied.
std::unique_ptr<writer_op> make_write_op(write_args args);
// writer::finish on the event-driven path (see finish_operation.cpp).
std::unique_ptr<writer_op> make_finish_op(std::optional<metadata_map> metadata);

}  // namespace ringsafe::asio::detail
