// async_writer: the blocking streaming writer, driven from a strand of the
// blocking pool so that the caller's io_context never waits on a disk.
#include <boost/asio/append.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "asio/blocking_pool.hpp"
#include "read/error_context.hpp"
#include "ringsafe/asio.hpp"

namespace ringsafe::asio {

struct async_writer::impl {
    explicit impl(writer w) : wr(std::move(w)), strand(boost::asio::make_strand(detail::blocking_pool())) {}
    writer wr;
    boost::asio::strand<boost::asio::thread_pool::executor_type> strand;
};

async_writer::async_writer(executor_type ex, writer w) : ex_(std::move(ex)), impl_(std::make_shared<impl>(std::move(w))) {}
async_writer::async_writer(async_writer&&) noexcept = default;
async_writer& async_writer::operator=(async_writer&&) noexcept = default;
// Operations hold the impl: the writer (and its abandon-unless-finished
// destructor) goes away on the pool after the last of them.
async_writer::~async_writer() = default;

writer& async_writer::get() noexcept { return impl_->wr; }

namespace detail {
namespace {

// Runs `body` (returning the byte count) on the writer's strand, then posts
// the handler with its result to `done_ex`.
template <typename Body>
void run_on_writer(const std::shared_ptr<async_writer::impl>& w, status* st, boost::asio::any_io_executor done_ex,
                   io_handler handler, Body body) {
    if (!w) {
        if (st) *st = status{make_error_code(errc::InvalidArgument), "operation on an empty async_writer"};
        boost::asio::post(done_ex, boost::asio::append(std::move(handler),
                                                        error_code(make_error_code(errc::InvalidArgument)),
                                                        std::size_t{0}));
        return;
    }
    auto work = boost::asio::make_work_guard(done_ex);
    boost::asio::post(w->strand, [w = w, st, done_ex = std::move(done_ex), work = std::move(work),
                                  handler = std::move(handler), body = std::move(body)]() mutable {
        std::error_code ec;
        std::string msg;
        std::size_t n = 0;
        try {
            n = body(w->wr);
        } catch (const std::system_error& e) {
            ec = e.code();
            msg = ringsafe::detail::bare_message(e);
        } catch (const std::exception& e) {
            ec = make_error_code(errc::IoError);
            msg = e.what();
        }
        if (st) {
            st->code = ec;
            st->message = msg;
        }
        w.reset();  // an abandoned writer is gone before its last handler runs
        boost::asio::post(done_ex, boost::asio::append(std::move(handler), error_code(ec), n));
        work.reset();
    });
}

}  // namespace

void start_write(const std::shared_ptr<async_writer::impl>& w, write_args args, status* st,
                 boost::asio::any_io_executor done_ex, io_handler handler) {
    run_on_writer(w, st, std::move(done_ex), std::move(handler), [a = std::move(args)](writer& wr) {
        wr.add(a.name, a.type, a.shape, a.bytes);
        return a.bytes.size();
    });
}

void start_finish(const std::shared_ptr<async_writer::impl>& w, std::optional<metadata_map> metadata, status* st,
                  boost::asio::any_io_executor done_ex, io_handler handler) {
    run_on_writer(w, st, std::move(done_ex), std::move(handler), [m = std::move(metadata)](writer& wr) {
        wr.finish(m ? &*m : nullptr);
        return static_cast<std::size_t>(wr.stats().data_bytes);
    });
}

}  // namespace detail
}  // namespace ringsafe::asio
