// One async_read in progress (engine-internal): its shards, run as
// asynchronous runs of their sources (source/async_source.hpp: local files on
// the reader's event ring, HTTP as coroutines on the reader's strand) or on
// the blocking pool (custom sources, and O_DIRECT files whose alignment the
// ring's bounce buffers cannot serve), and the completion of the caller's
// handler once all of them are back.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/executor_work_guard.hpp>

#include <optional>

#include "asio/read_progress.hpp"
#include "asio/reader_state.hpp"
#include "plan/plan_data.hpp"
#include "source/async_source.hpp"

namespace ringsafe::asio::detail {

struct read_operation : std::enable_shared_from_this<read_operation> {
    read_operation(std::shared_ptr<async_reader::impl> owner, read_plan plan, read_callbacks cb, status* st,
                   boost::asio::any_io_executor done_ex, io_handler handler);

    // Starts every shard (on the strand).
    void run();
    // Stops every shard; completes with operation_aborted once all are back (on the strand).
    void cancel();
    // Completes at once with an error found before any I/O (on the strand).
    void fail_now(std::error_code ec, std::string message);

private:
    void start_async_shard(std::size_t entry, ringsafe::detail::async_source& src);
    void start_pool_shard(std::size_t entry);
    void stop_shards();
    void shard_done(std::error_code ec, std::string message, std::uint64_t landed, bool cancelled);
    void complete();
    std::string describe(std::size_t entry, std::uint32_t op) const;

    std::shared_ptr<async_reader::impl> owner_;
    read_plan plan_;
    read_callbacks cb_;
    bool progress_wanted_ = false;           // cb_ has a callback (read by pool threads, set before)
    std::optional<read_progress> progress_;  // made in run(), once the plan is known valid
    status* st_;
    boost::asio::any_io_executor done_ex_;
    boost::asio::executor_work_guard<boost::asio::any_io_executor> work_;
    io_handler handler_;
    boost::asio::cancellation_slot slot_;

    std::vector<std::shared_ptr<ringsafe::detail::async_run>> runs_;  // async-source shards (files on the ring, HTTP)
    std::shared_ptr<std::atomic<bool>> pool_cancel_;      // pool shards' flag
    unsigned pending_ = 0;
    bool cancelled_ = false;
    bool completed_ = false;
    std::uint64_t landed_ = 0;
    std::error_code ec_;
    std::string message_;
};

}  // namespace ringsafe::asio::detail
