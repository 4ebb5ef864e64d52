// start_file_run: a file source's read_ops as a job on the event ring.
#include "uring/file_run.hpp"

#include <cstdint>
#include <utility>

#include "uring/event_ring.hpp"
#include "uring/file_job.hpp"

namespace ringsafe::uring {
namespace {

class file_run final : public detail::async_run {
public:
    file_run(std::shared_ptr<event_ring> ring, std::shared_ptr<file_job> job)
        : ring_(std::move(ring)), job_(std::move(job)) {}
    void cancel() override { ring_->cancel(*job_); }

private:
    std::shared_ptr<event_ring> ring_;
    std::shared_ptr<file_job> job_;
};

}  // namespace

bool file_runs_on_ring(const file_view& view) noexcept {
    return !view.direct || (view.direct_fd >= 0 && event_ring::fits_direct(view.align, view.mem_align));
}

std::shared_ptr<detail::async_run> start_file_run(const detail::async_context& ctx, const file_view& view,
                                                  std::span<const read_op> ops, detail::async_callbacks cb) {
    auto job = std::make_shared<file_job>();
    job->fd = view.direct ? view.direct_fd : view.fd;
    job->path = view.path;
    job->size = view.size;
    job->direct = view.direct;
    job->align = view.direct ? view.align : 1;
    job->mem_align = view.direct ? view.mem_align : 1;
    job->ops = ops;
    job->describe = std::move(cb.describe);
    // Bytes are reported while the job runs; those landing after it stopped
    // go to on_stopped_bytes when it is done.
    auto reported = std::make_shared<std::uint64_t>(0);
    job->on_bytes = [on_bytes = std::move(cb.on_bytes), reported](std::size_t op, std::uint64_t n) {
        *reported += n;
        if (on_bytes) on_bytes(op, n);
    };
    job->on_done = [on_done = std::move(cb.on_done), on_stopped = std::move(cb.on_stopped_bytes),
                    reported](file_job& j) {
        if (on_stopped && j.landed > *reported) on_stopped(j.landed - *reported);
        on_done(j.ec, j.message, j.cancelled);
    };
    // The contexts' rings are event rings (engine/asio makes them): the only async_ring there is.
    auto ring = std::static_pointer_cast<event_ring>(ctx.ring);
    auto run = std::make_shared<file_run>(ring, job);
    ring->start(std::move(job));
    return run;
}

}  // namespace ringsafe::uring
