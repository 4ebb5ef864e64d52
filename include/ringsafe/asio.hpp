// Optional Boost.Asio front end: open, read and write checkpoints from a
// service that already runs an io_context, without blocking its threads and
// without an event loop of ringsafe's own.
//
//   boost::asio::awaitable<void> load(boost::asio::any_io_executor ex) {
//       namespace ra = ringsafe::asio;
//       auto r = co_await ra::async_open(ex, "model.safetensors", {}, boost::asio::use_awaitable);
//       auto sel = r.get().select_glob("model.layers.0.*");
//       std::vector<std::byte> arena(r.get().packed_size(sel));
//       read_plan plan = r.get().plan_packed(sel, arena);
//       ra::read_callbacks progress;  // optional; runs on ex's thread(s), one call at a time
//       progress.on_progress = [](std::uint64_t done, std::uint64_t total) { /* update a gauge */ };
//       std::size_t n = co_await ra::async_read(r, plan, progress, boost::asio::use_awaitable);
//   }
//
// Every async_* function accepts any completion token (a callback,
// use_awaitable, use_future, deferred, as_tuple(...), bind_cancellation_slot
// ...). Completions run on the handler's associated executor (by default the
// executor of the async_reader / async_writer / async_open call), never
// inside the initiating call. Errors arrive as boost::system::error_code
// wrapping ringsafe's std::error_code (ringsafe::errc kinds, system_category
// for errno), or boost::asio::error::operation_aborted for cancellation;
// use_awaitable and use_future throw boost::system::system_error; the overloads taking `status&` also fill in the full message
// naming the source, offset and tensor (the status must outlive the operation).
//
// How bytes move:
//  * Local files (open_file sources, page cache): one io_uring per
//    async_reader. Its completions wake the caller's io_context through an
//    eventfd registered with the ring and watched by an Asio descriptor (no
//    polling, no thread per request). Reads are submitted with IOSQE_ASYNC,
//    so the kernel's io-wq workers do the page-cache copies; the io_context
//    thread only submits and reaps. Up to async_options::queue_depth reads are
//    kept in flight across all operations; short reads are resubmitted.
//    O_DIRECT file sources (file_options::direct) use the same ring: each
//    read is rounded out to the file's DIO alignment; aligned runs land
//    straight in the caller's buffer when its address is aligned, other
//    pieces (unaligned edges, misaligned buffers, the block holding EOF) are
//    read into a 1 MiB bounce buffer per ring slot (page aligned, allocated
//    on first use) and copied out on the io_context's thread. They are
//    submitted without IOSQE_ASYNC (the device does the transfer).
//  * HTTP(S)/S3 sources: the Range requests run as coroutines on the
//    async_reader's executor (its internal strand), over keep-alive
//    connections from a pool bound to that executor (one per async_reader,
//    kept across reads; the blocking reader API keeps a separate one). No
//    thread and no event loop of ringsafe's own: bodies are read from the
//    socket straight into the caller's buffers by the io_context's threads.
//    Hosts given as IP literals connect directly; host names go through
//    Asio's resolver, which runs getaddrinfo on one internal thread per
//    io_context (Asio's own, started on first use).
//  * Custom sources (reader_options::open), and O_DIRECT files whose
//    alignment exceeds the bounce buffers' (offsets over 1 MiB, addresses
//    over 4 KiB): the source's blocking execute() runs on a small internal
//    thread pool (two threads, shared by the process). Cancellation raises
//    the source's cancel flag: in-flight reads are drained before the
//    operation completes.
//  * async_open: reader::open's steps as coroutines on an internal strand of
//    `ex`, with the same results and messages. Local files: IORING_OP_OPENAT
//    (the flags file_options implies, plus the O_DIRECT descriptor when
//    direct) and IORING_OP_READ of the prefix (a second read only when the
//    header, or an index, is larger), on the ring the resulting async_reader
//    keeps. The fstat of the opened descriptor (type, size) and, when
//    direct, the statx of its DIO alignment run inline: they read the
//    in-memory inode, and io_uring would punt every statx to an io-wq worker
//    (~55 us more per file measured). The kernel may run openat on its io-wq
//    workers (iou-wrk threads).
//    URLs: the first request (size, validators, prefix; redirects, auth, S3
//    signing, retries) runs as a coroutine over the connection pool of the
//    async_reader's executor, which later async reads reuse. The shards of
//    an index open concurrently (reader_options::parallel_shards at a time).
//    Only custom opens (reader_options::open set), which cannot be made
//    asynchronous, block: they run reader::open on the thread pool above.
//  * async_writer: its operations run, in initiation order, on an internal
//    strand of the async_writer's executor. The writer's own io_uring (its
//    write ring, O_DIRECT where the filesystem allows) signals an eventfd
//    watched by an Asio descriptor, as for reads. async_write validates as
//    writer::add, then copies the tensor into the writer's staging blocks
//    (writer_options::staging_blocks x block_size) as they free up, each full
//    block going out as one ring write; when every block is in flight it
//    waits on the descriptor, never in the kernel. It completes once the last
//    byte is copied, so the pipeline stays full across tensors (zero-copy
//    would make each write wait for its own bytes to land: 0.8 vs 1.4 GB/s
//    for 16 x 32 MiB tensors written one after another on the test VM, with
//    the blocking writer's zero-copy add standing in). async_finish
//    flushes the last block, then writes the header (IORING_OP_WRITE), fsyncs
//    (IORING_OP_FSYNC), links / renames the file into place
//    (IORING_OP_LINKAT / IORING_OP_RENAMEAT) and fsyncs the directory
//    (IORING_OP_OPENAT + IORING_OP_FSYNC), each a ring operation (the kernel
//    runs these on its io-wq workers, iou-wrk threads). Inline on
//    the io_context's thread: copying into staging, fallocate ahead of O_DIRECT
//    writes, the ftruncate that cuts the O_DIRECT padding, closing
//    descriptors. On the thread pool above (the only writer work there): the
//    data relocation when the header outgrows its reservation
//    (writer_stats::relocation), and the finish of a writer::open_append
//    writer (fdatasync, header rewrite, fsync) once its data is flushed.
//
// Cancellation (async_read): the handler's cancellation slot accepts
// terminal, partial and total cancellation alike. In-flight ring reads get
// IORING_OP_ASYNC_CANCEL; in-flight HTTP requests are abandoned at once (the
// operation's connections are closed, never returned to the pool, and its
// retry timers cancelled), so a stalled server does not delay it. The
// operation waits for the completion of every read it issued before
// completing with operation_aborted, so no I/O targets the caller's buffers
// once the handler runs. The buffers may hold
// partial data (hence total cancellation, too, leaves side effects).
// Cancellation (async_open): the same slot types; in-flight ring operations
// get IORING_OP_ASYNC_CANCEL and the first request of a URL is abandoned at
// once; descriptors opened so far are closed, and the open completes with
// operation_aborted (and an empty async_reader). Custom opens on the pool
// are not cancellable.
// Cancellation (async_write, async_finish): the same slot types; cancelling
// a writer operation abandons the writer. The operation stops (a write stops
// copying into staging and never reads the caller's bytes again; a finish
// stops before its next step), the ring's in-flight writes complete, the
// file is abandoned exactly as after an I/O error (the temporary removed,
// nothing at the target; append mode: the new data truncated away), and then
// the handler gets operation_aborted. An operation still queued behind
// earlier ones is stopped when it reaches the head of the queue (the earlier
// ones complete normally first). Operations queued behind a cancelled one
// fail with WriterState ("... finished or abandoned writer"). Once a finish
// has submitted its rename / link (append mode: once its commit on the
// thread pool, fdatasync + header rewrite + fsync, has started) it is too
// late: it completes normally and the file is published. A cancellation after
// completion, or one reaching a writer that is already finished or abandoned
// (the operation then fails as it would have), does nothing.
//
// Threads:
//  * async_open may be called from any thread; its steps run one at a time
//    on a strand of `ex` (the strand the async_reader it makes keeps). The
//    io_context must not be destroyed while an async_open is outstanding
//    (cancel it and run the io_context until the handler has run).
//  * async_reader: async_read may be called from any thread, concurrently
//    (the reader's own state is serialized on an internal strand of its
//    executor). Moving, assigning or destroying an async_reader must not race
//    with calls on it. Destroying it cancels its outstanding reads (they
//    complete with operation_aborted); its ring lives until they have.
//    get() gives the reader: listing and planning are thread-safe.
//  * async_writer: its calls may come from any thread; operations run one at
//    a time in the order they were initiated, on its executor's threads
//    (completions too, unless the handler has its own executor). Do not use
//    get() while operations are outstanding. The io_context must outlive it
//    (its eventfd descriptor belongs to the io_context).
//  * read_callbacks run inside the async_reader's strand (see there).
//  * The io_context may run on one thread or several. It must outlive the
//    async_readers bound to it (their ring descriptor and HTTP connections
//    belong to it).
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
// missing io_uring are reported before any I/O.
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
