// The file source's asynchronous reads (engine-internal): its read_ops as
// one job on the event ring of the async context.
#pragma once

#include <memory>
#include <span>

#include "source/async_source.hpp"
#include "uring/file_view.hpp"

namespace ringsafe::uring {

// Whether the event ring can read this file (O_DIRECT files only with
// alignments its bounce buffers serve).
bool file_runs_on_ring(const file_view& view) noexcept;
// Starts reading `ops` of the file as a job on ctx.ring (see async_source::start_async).
std::shared_ptr<detail::async_run> start_file_run(const detail::async_context& ctx, const file_view& view,
                                                  std::span<const read_op> ops, detail::async_callbacks cb);

}  // namespace ringsafe::uring
