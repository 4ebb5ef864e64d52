// async_open: reader::open on the blocking pool, completion on the caller's executor.
#include <boost/asio/append.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include "asio/blocking_pool.hpp"
#include "asio/reader_state.hpp"
#include "read/error_context.hpp"

namespace ringsafe::asio::detail {

void start_open(async_reader::executor_type ex, std::string spec, reader_options ropts, async_options aopts,
                status* st, boost::asio::any_io_executor done_ex, open_handler handler) {
    auto work = boost::asio::make_work_guard(done_ex);
    boost::asio::post(blocking_pool(), [ex = std::move(ex), spec = std::move(spec), ropts = std::move(ropts), aopts,
                                        st, done_ex = std::move(done_ex), work = std::move(work),
                                        handler = std::move(handler)]() mutable {
        std::error_code ec;
        std::string msg;
        async_reader result;
        try {
            result = async_reader(ex, reader::open(spec, ropts), aopts);
        } catch (const std::system_error& e) {
            ec = e.code();
            msg = ringsafe::detail::bare_message(e);
        } catch (const std::exception& e) {
            ec = make_error_code(errc::IoError);
            msg = spec + ": " + e.what();
        }
        if (st) {
            st->code = ec;
            st->message = msg;
        }
        boost::asio::post(done_ex, boost::asio::append(std::move(handler), error_code(ec), std::move(result)));
        work.reset();
    });
}

}  // namespace ringsafe::asio::detail
