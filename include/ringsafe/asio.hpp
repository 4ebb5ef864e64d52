// Boost.Asio front end: open, read and write checkpoints from a service that
// already runs an io_context, without blocking its threads and without an
// event loop of ringsafe's own.
//
//   boost::asio::awaitable<void> load(boost::asio::any_io_executor ex) {
//       namespace ra = ringsafe::asio;
//       auto r = co_await ra::async_open(ex, "model.safetensors", {}, boost::asio::use_awaitable);
//       auto sel = r.get().select_glob("model.layers.0.*");
//       std::vector<std::byte> arena(r.get().packed_size(sel));
//       read_plan plan = r.get().plan_packed(sel, arena);
//       std::size_t n = co_await ra::async_read(r, plan, boost::asio::use_awaitable);
//   }
//
// Every async_* function accepts any completion token; completions run on
// the handler's associated executor, never inside the initiating call.
// Errors arrive as boost::system::error_code wrapping ringsafe's
// std::error_code, or operation_aborted for cancellation. How bytes move,
// cancellation and threading: README.md, "Asio front end". The engine
// behind the templates: ringsafe/detail/asio_initiate.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/system/error_code.hpp>

#include "ringsafe/error.hpp"
#include "ringsafe/reader.hpp"
#include "ringsafe/writer.hpp"

namespace ringsafe::asio {

// Completion signature of reads and writes: the error, and bytes moved (for
// reads: all of the plan's bytes on success, those landed so far otherwise).
// The error is a boost::system::error_code because that is what Asio's
// use_awaitable / use_future turn into exceptions; it wraps ringsafe's
// std::error_code losslessly (compare with == make_error_code(errc::...), or
// convert with static_cast<std::error_code>(ec)).
using error_code = boost::system::error_code;
using io_signature = void(error_code, std::size_t);
using io_handler = boost::asio::any_completion_handler<io_signature>;

// How an async_reader drives its ring.
struct async_options {
    // Reads in flight on the ring, over all operations (1..4096). Page-cache
    // copies run on io-wq workers, so this is also how many copies may run at
    // once. 32, as the blocking reader's file_options::queue_depth: on the
    // 2-core test VM, bench_asio (1.07 GB hot, 7 reps, alternating runs) gave
    // async/sync ratios of 0.95-1.05 at 32 against 0.89-0.96 at 8.
    unsigned queue_depth = 32;
};

// Progress of one async_read (optional). The callbacks run on the
// async_reader's executor, inside its internal strand: one at a time, never
// concurrently with another callback of the same async_reader, and all of
// them before the read's completion handler runs. They must be cheap and must
// not block or throw. A cancelled or failed read stops calling them.
struct read_callbacks {
    // Bytes landed so far across the whole plan, and the plan's total.
    std::function<void(std::uint64_t done, std::uint64_t total)> on_progress;
    // Once per request (target: selection order for tensor reads) when all of
    // its bytes have landed; `tensor` is the tensor it reads. Zero-byte
    // targets complete first, before any I/O.
    std::function<void(std::size_t target, const tensor_info& tensor)> on_tensor_done;
};

// A reader bound to an executor: the target of async_read. Movable; an
// async_reader made by the default constructor (or moved from) is empty.
class async_reader {
public:
    using executor_type = boost::asio::any_io_executor;
    struct impl;

    async_reader() = default;
    // Takes `r` over and binds it to `ex` (normally an io_context's executor),
    // creating the ring and its eventfd. Throws ringsafe::error
    // (system_category) when io_uring is unavailable.
    async_reader(executor_type ex, reader r, const async_options& opts = {});
    // Engine use (async_open): adopts an engine state already bound to `ex`.
    async_reader(executor_type ex, std::shared_ptr<impl> state) noexcept;
    async_reader(async_reader&&) noexcept;
    async_reader& operator=(async_reader&&) noexcept;
    ~async_reader();  // cancels outstanding reads (see the threading notes)

    bool valid() const noexcept { return impl_ != nullptr; }
    const executor_type& get_executor() const noexcept { return ex_; }
    // The reader (listing, selections, plans). Precondition: valid().
    reader& get() noexcept;
    const reader& get() const noexcept;
    // Requests cancellation of every outstanding read (operation_aborted).
    void cancel();

    const std::shared_ptr<impl>& state() const noexcept { return impl_; }  // for the templates below

private:
    executor_type ex_;
    std::shared_ptr<impl> impl_;
};

// A streaming writer bound to an executor: the target of async_write and
// async_finish. Its operations run one at a time on an internal strand of the
// executor, driven by the writer's io_uring completions (see "How bytes move").
class async_writer {
public:
    using executor_type = boost::asio::any_io_executor;
    struct impl;

    async_writer() = default;
    // Takes `w` over (a new file or writer::open_append) and registers an
    // eventfd with its ring. Operations complete on `ex` (or the handler's
    // executor). Throws ringsafe::error for an empty writer or when eventfd /
    // io_uring_register_eventfd fail.
    async_writer(executor_type ex, writer w);
    async_writer(async_writer&&) noexcept;
    async_writer& operator=(async_writer&&) noexcept;
    // Without a successful async_finish the file is abandoned (nothing at the
    // target path) once outstanding operations have run and the ring's writes
    // have completed (on the executor: the io_context must run for it).
    ~async_writer();

    bool valid() const noexcept { return impl_ != nullptr; }
    const executor_type& get_executor() const noexcept { return ex_; }
    writer& get() noexcept;  // stats() etc.; not while operations are outstanding

    const std::shared_ptr<impl>& state() const noexcept { return impl_; }

private:
    executor_type ex_;
    std::shared_ptr<impl> impl_;
};

using open_signature = void(error_code, async_reader);
using open_handler = boost::asio::any_completion_handler<open_signature>;

}  // namespace ringsafe::asio

#include "ringsafe/detail/asio_initiate.hpp"

namespace ringsafe::asio {

// async_open with the default reader_options. (With GCC 12, avoid braced
// temporaries such as `{}` as arguments inside a co_await expression: GCC 12
// destroys them twice. Name the object instead.)
template <typename Token>
auto async_open(async_reader::executor_type ex, std::string spec, Token&& token);

// Opens `spec` (path, URL or sharded index, as reader::open) without
// blocking: io_uring operations and HTTP requests on `ex` (see "How bytes
// move"; custom opens run on the internal thread pool), and binds the reader
// to `ex`. Completes with the async_reader, or the error reader::open would
// throw and an empty one (st gets the same message naming the path/URL), or
// operation_aborted when cancelled. Bad async_options (queue_depth) and a
// missing io_uring are reported before any I/O. Host names are resolved
// within http_options::connect_timeout (HttpError past it, naming the URL),
// on a detached thread per lookup that never touches `ex`'s io_context.
// Destroying the io_context while the open is outstanding destroys the
// handler without running it and frees what the open holds (its ring, the
// files opened so far).
template <typename Token>
auto async_open(async_reader::executor_type ex, std::string spec, reader_options ropts, Token&& token,
                async_options aopts = {}) {
    return detail::initiate_open(std::move(ex), std::move(spec), std::move(ropts), aopts, nullptr, std::forward<Token>(token));
}
template <typename Token>
auto async_open(async_reader::executor_type ex, std::string spec, reader_options ropts, status& st,
                Token&& token, async_options aopts = {}) {
    return detail::initiate_open(std::move(ex), std::move(spec), std::move(ropts), aopts, &st, std::forward<Token>(token));
}

template <typename Token>
auto async_open(async_reader::executor_type ex, std::string spec, Token&& token) {
    return async_open(std::move(ex), std::move(spec), reader_options{}, std::forward<Token>(token));
}

// Executes `plan` (made by r.get()) into its caller buffers, which must stay
// valid and untouched until the handler runs. Completes with the plan's byte
// count, or the error: InvalidArgument (another reader's plan), Truncated, an
// errno (system_category), HttpError / ObjectChanged / RangeNotSupported
// (remote sources), operation_aborted (cancelled). `r` must outlive the
// initiation (the operation itself keeps the engine alive).
template <typename Token>
auto async_read(async_reader& r, read_plan plan, Token&& token) {
    return async_read(r, std::move(plan), read_callbacks{}, std::forward<Token>(token));
}
// The same, reporting progress through `cb` (see read_callbacks).
template <typename Token>
auto async_read(async_reader& r, read_plan plan, read_callbacks cb, Token&& token) {
    return detail::initiate_read(r, std::move(plan), std::move(cb), nullptr, std::forward<Token>(token));
}
// The same; `st` (which must outlive the operation) gets the full message
// naming the source, offset or URL and range, and the tensor.
template <typename Token>
auto async_read(async_reader& r, read_plan plan, status& st, Token&& token) {
    return async_read(r, std::move(plan), read_callbacks{}, st, std::forward<Token>(token));
}
template <typename Token>
auto async_read(async_reader& r, read_plan plan, read_callbacks cb, status& st, Token&& token) {
    return detail::initiate_read(r, std::move(plan), std::move(cb), &st, std::forward<Token>(token));
}

// Reads each selected tensor into its buffer (one per tensor, in selection
// order; sizes checked as reader::plan before any I/O, errors delivered to the
// handler). The buffers must stay valid until the handler runs.
template <typename Token>
auto async_read(async_reader& r, selection sel, std::vector<std::span<std::byte>> dsts, Token&& token) {
    return async_read(r, std::move(sel), std::move(dsts), read_callbacks{}, std::forward<Token>(token));
}
// The same, reporting progress through `cb` (see read_callbacks).
template <typename Token>
auto async_read(async_reader& r, selection sel, std::vector<std::span<std::byte>> dsts, read_callbacks cb,
                Token&& token) {
    return detail::initiate_read(r, std::move(sel), std::move(dsts), std::move(cb), nullptr, std::forward<Token>(token));
}
// The same; `st` (which must outlive the operation) gets the full message.
template <typename Token>
auto async_read(async_reader& r, selection sel, std::vector<std::span<std::byte>> dsts, status& st,
                Token&& token) {
    return async_read(r, std::move(sel), std::move(dsts), read_callbacks{}, st, std::forward<Token>(token));
}
template <typename Token>
auto async_read(async_reader& r, selection sel, std::vector<std::span<std::byte>> dsts, read_callbacks cb,
                status& st, Token&& token) {
    return detail::initiate_read(r, std::move(sel), std::move(dsts), std::move(cb), &st, std::forward<Token>(token));
}

// Adds a whole tensor (writer::add) after the operations initiated before it:
// the same validation and errors (TensorInvalidInfo, duplicate or bad names...:
// the writer stays usable). `bytes` must stay valid and unchanged until the
// handler runs; they are copied into the writer's staging (never written from
// after the handler). Completes with bytes.size() once copied; a write error
// from the ring (this tensor's or an earlier one's) completes the operation
// that notices it, naming tensor and file offset, after the file has been
// abandoned (nothing at the target path when the handler runs). Cancellation
// through the handler's slot abandons the file and completes with
// operation_aborted (st: that code and a message naming tensor and path);
// later operations fail with WriterState (see "Cancellation").
template <typename Token>
auto async_write(async_writer& w, std::string_view name, dtype type, std::vector<std::uint64_t> shape,
                 std::span<const std::byte> bytes, Token&& token) {
    return detail::initiate_write(w, {std::string(name), type, std::move(shape), bytes}, nullptr,
                                  std::forward<Token>(token));
}
template <typename Token>
auto async_write(async_writer& w, std::string_view name, dtype type, std::vector<std::uint64_t> shape,
                 std::span<const std::byte> bytes, status& st, Token&& token) {
    return detail::initiate_write(w, {std::string(name), type, std::move(shape), bytes}, &st,
                                  std::forward<Token>(token));
}

// Publishes the file (writer::finish with `metadata`, copied) after the
// operations initiated before it, through ring operations (see "How bytes
// move"). Completes with the tensor bytes written (writer_stats::data_bytes);
// get().stats() has the rest once it completed. Errors as writer::finish
// (WriterState when finished twice or a tensor is open, leaving the writer
// usable; I/O errors abandon the file before the handler runs). Cancelled
// before its rename / link is submitted, it abandons the file and completes
// with operation_aborted (st names the path); after that, it completes
// normally (see "Cancellation").
template <typename Token>
auto async_finish(async_writer& w, std::optional<metadata_map> metadata, Token&& token) {
    return detail::initiate_finish(w, std::move(metadata), nullptr, std::forward<Token>(token));
}
template <typename Token>
auto async_finish(async_writer& w, std::optional<metadata_map> metadata, status& st, Token&& token) {
    return detail::initiate_finish(w, std::move(metadata), &st, std::forward<Token>(token));
}

}  // namespace ringsafe::asio
