// The initiations behind ringsafe/asio.hpp's templates and the compiled
// engine entry points they call (engine/asio). Included by ringsafe/asio.hpp
// after its types; not a header of its own.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>

namespace ringsafe::asio {

// The compiled engine behind the templates (engine/asio). `done_ex` is the
// executor the handler's completion is posted to; `st` may be null.
namespace detail {
void start_open(async_reader::executor_type ex, std::string spec, reader_options ropts, async_options aopts,
                status* st, boost::asio::any_io_executor done_ex, open_handler handler);
void start_read(const std::shared_ptr<async_reader::impl>& r, read_plan plan, read_callbacks cb, status* st,
                boost::asio::any_io_executor done_ex, io_handler handler);
void start_read(const std::shared_ptr<async_reader::impl>& r, selection sel,
                std::vector<std::span<std::byte>> dsts, read_callbacks cb, status* st,
                boost::asio::any_io_executor done_ex, io_handler handler);
struct write_args {
    std::string name;
    dtype type{};
    std::vector<std::uint64_t> shape;
    std::span<const std::byte> bytes;
};
void start_write(const std::shared_ptr<async_writer::impl>& w, write_args args, status* st,
                 boost::asio::any_io_executor done_ex, io_handler handler);
void start_finish(const std::shared_ptr<async_writer::impl>& w, std::optional<metadata_map> metadata,
                  status* st, boost::asio::any_io_executor done_ex, io_handler handler);

template <typename Handler, typename Executor>
boost::asio::any_io_executor completion_executor(const Handler& h, const Executor& fallback) {
    return boost::asio::get_associated_executor(h, fallback);
}

// The initiations behind the public overloads below (`st` may be null).
template <typename Token>
auto initiate_open(async_reader::executor_type ex, std::string spec, reader_options ropts, async_options aopts,
                   status* st, Token&& token) {
    return boost::asio::async_initiate<Token, open_signature>(
        [](auto handler, async_reader::executor_type ex, std::string spec, reader_options ropts,
           async_options aopts, status* st) {
            auto done = completion_executor(handler, ex);
            start_open(std::move(ex), std::move(spec), std::move(ropts), aopts, st, std::move(done),
                       open_handler(std::move(handler)));
        },
        token, std::move(ex), std::move(spec), std::move(ropts), aopts, st);
}
template <typename Token>
auto initiate_read(async_reader& r, read_plan plan, read_callbacks cb, status* st, Token&& token) {
    return boost::asio::async_initiate<Token, io_signature>(
        [](auto handler, std::shared_ptr<async_reader::impl> s, async_reader::executor_type ex, read_plan plan,
           read_callbacks cb, status* st) {
            auto done = completion_executor(handler, ex);
            start_read(s, std::move(plan), std::move(cb), st, std::move(done), io_handler(std::move(handler)));
        },
        token, r.state(), r.get_executor(), std::move(plan), std::move(cb), st);
}
template <typename Token>
auto initiate_read(async_reader& r, selection sel, std::vector<std::span<std::byte>> dsts, read_callbacks cb,
                   status* st, Token&& token) {
    return boost::asio::async_initiate<Token, io_signature>(
        [](auto handler, std::shared_ptr<async_reader::impl> s, async_reader::executor_type ex, selection sel,
           std::vector<std::span<std::byte>> dsts, read_callbacks cb, status* st) {
            auto done = completion_executor(handler, ex);
            start_read(s, std::move(sel), std::move(dsts), std::move(cb), st, std::move(done),
                       io_handler(std::move(handler)));
        },
        token, r.state(), r.get_executor(), std::move(sel), std::move(dsts), std::move(cb), st);
}
template <typename Token>
auto initiate_write(async_writer& w, write_args args, status* st, Token&& token) {
    return boost::asio::async_initiate<Token, io_signature>(
        [](auto handler, std::shared_ptr<async_writer::impl> s, async_writer::executor_type ex, write_args a,
           status* st) {
            auto done = completion_executor(handler, ex);
            start_write(s, std::move(a), st, std::move(done), io_handler(std::move(handler)));
        },
        token, w.state(), w.get_executor(), std::move(args), st);
}
template <typename Token>
auto initiate_finish(async_writer& w, std::optional<metadata_map> metadata, status* st, Token&& token) {
    return boost::asio::async_initiate<Token, io_signature>(
        [](auto handler, std::shared_ptr<async_writer::impl> s, async_writer::executor_type ex,
           std::optional<metadata_map> m, status* st) {
            auto done = completion_executor(handler, ex);
            start_finish(s, std::move(m), st, std::move(done), io_handler(std::move(handler)));
        },
        token, w.state(), w.get_executor(), std::move(metadata), st);
}
}  // namespace detail

}  // namespace ringsafe::asio
