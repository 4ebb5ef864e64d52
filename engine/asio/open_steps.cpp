// The steps of async_open: files through io_uring operations, URLs through
// their first request, the header after the prefix.
#include "asio/open_steps.hpp"

#include <algorithm>
#include <cerrno>
#include <tuple>

#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "dispatch/prepare_source.hpp"
#include "file/file_open.hpp"
#include "source/async_source.hpp"
#include "source/deferred_open.hpp"
#include "uring/file_source.hpp"
#include "uring/file_view.hpp"
#include "uring/transient_result.hpp"

namespace ringsafe::asio::detail {
namespace net = boost::asio;

net::awaitable<int> ring_op(open_context& c, single_submit submit) {
    for (unsigned tries = 0;; ++tries) {
        c.check_cancelled();
        std::uint64_t id = 0;
        bool pending = true;
        const ringsafe::detail::abandon_list::entry cancelling(&c.abandon, [&] {
            if (pending) c.ring->cancel_single(id);
        });
        const int res = co_await net::async_initiate<const net::use_awaitable_t<>&, void(int)>(
            [&](auto handler) {
                auto h = std::make_shared<decltype(handler)>(std::move(handler));
                id = submit(*c.ring, [h](int r) { std::move(*h)(r); });
            },
            net::use_awaitable);
        pending = false;
        // Resubmitted; a -ECANCELED we asked for throws in check_cancelled() first.
        if (!uring::transient_result(res) || tries >= uring::max_transient_retries) co_return res;
    }
}

namespace {

// pread_exact's loop as ring reads of the buffered descriptor.
net::awaitable<void> read_on_ring(open_context& c, int fd, const std::string& path, std::uint64_t offset,
                                  std::span<std::byte> dst) {
    std::uint64_t done = 0;
    while (done < dst.size()) {
        const auto len = static_cast<unsigned>(std::min<std::uint64_t>(dst.size() - done, 1u << 30));
        std::byte* to = dst.data() + done;
        const std::uint64_t at = offset + done;
        const int r = co_await ring_op(c, [&](uring::event_ring& ring, std::function<void(int)> done) {
            return ring.submit_read(fd, to, len, at, std::move(done));
        });
        c.check_cancelled();
        if (r < 0) file::raise_read_failed(path, -r, at);
        if (r == 0) file::raise_read_truncated(path, at, offset, offset + dst.size());
        done += static_cast<std::uint64_t>(r);
    }
}

// file::open_blocking's steps: the opens and the prefix read as io_uring
// operations, the fstat and the O_DIRECT alignment query inline.
net::awaitable<std::unique_ptr<source>> open_local(open_context& c, const std::string& path, const std::string& named) {
    const file_options& fo = c.ropts.source.file;
    uring::check_file_options(path, fo);
    file::opened_file f;
    auto name = std::make_shared<const std::string>(path);
    auto open_with = [&](int flags) {
        return ring_op(c, [name, flags](uring::event_ring& ring, std::function<void(int)> done) {
            return ring.submit_openat(name, flags, std::move(done));
        });
    };
    int r = co_await open_with(file::buffered_open_flags);
    if (r >= 0) f.fd = file::owned_fd(r);
    c.check_cancelled();
    if (r < 0) file::raise_open_failed(path, -r);

    // fstat inline: it reads the opened file's in-memory inode. io_uring runs
    // every statx on an io-wq worker, which cost ~55 us more per file
    // (bench_asio_open: 240 vs 183 us for one file, 1400 vs 1100 for 8 shards).
    file::stat_opened(path, f);

    if (fo.direct) {
        r = co_await open_with(file::direct_open_flags);
        if (r >= 0) f.direct_fd = file::owned_fd(r);
        c.check_cancelled();
        if (r < 0) file::raise_direct_open_failed(path, -r);
        f.align = file::query_dio_alignment(f.direct_fd.get(), path);  // statx inline, as fstat above
    }
    f.prefix.resize(static_cast<std::size_t>(std::min(fo.prefetch, f.size)));
    co_await read_on_ring(c, f.fd.get(), path, 0, f.prefix);
    co_return uring::adopt_file(path, fo, std::move(f), named);
}

// Kinds that open in two steps (remote objects): the source, then its first
// request on the strand.
net::awaitable<std::unique_ptr<source>> open_deferred(open_context& c, std::unique_ptr<source> src) {
    c.check_cancelled();
    co_await ringsafe::detail::deferred_side(*src).first_request(c.strand, &c.abandon);
    c.check_cancelled();
    co_return src;
}

}  // namespace

net::awaitable<std::unique_ptr<source>> open_one(open_context& c, const std::string& spec) {
    auto p = ringsafe::dispatch::prepare_source(spec, c.ropts.source);
    if (p.deferred) co_return co_await open_deferred(c, std::move(p.deferred));
    co_return co_await open_local(c, p.local_file, p.name);  // a path, or a store's cache file (hf://)
}

net::awaitable<void> read_exact_async(open_context& c, source& src, std::uint64_t offset, std::span<std::byte> dst,
                                      bool one_request) {
    if (auto view = uring::view_file(src)) {
        co_await read_on_ring(c, view->fd, *view->path, offset, dst);
        co_return;
    }
    auto* async = dynamic_cast<ringsafe::detail::async_source*>(&src);
    if (!async) raise(errc::InvalidArgument, src.name() + ": no asynchronous reads for this source");
    c.check_cancelled();
    read_op op{offset, dst.size(), dst.data(), 0};
    op.one_request = one_request;
    std::shared_ptr<ringsafe::detail::async_run> run;
    bool pending = true;
    const ringsafe::detail::abandon_list::entry cancelling(&c.abandon, [&] {
        if (pending && run) run->cancel();
    });
    auto [ec, message, cancelled] =
        co_await net::async_initiate<const net::use_awaitable_t<>&, void(std::error_code, std::string, bool)>(
            [&](auto handler) {
                auto h = std::make_shared<decltype(handler)>(std::move(handler));
                ringsafe::detail::async_callbacks cb;
                cb.on_done = [h](std::error_code e, std::string m, bool x) { std::move(*h)(e, std::move(m), x); };
                run = async->start_async({c.strand, c.ring}, {&op, 1}, std::move(cb));
            },
            net::use_awaitable);
    pending = false;
    c.check_cancelled();
    if (ec) throw error(ec, message);
}

net::awaitable<ringsafe::read::shard_header> load_header_async(open_context& c, source& src) {
    ringsafe::read::header_stream s(src, c.ropts.parse);
    while (s.more()) {
        const read_op op = s.op();
        try {
            co_await read_exact_async(c, src, op.offset, {op.dst, op.length}, op.one_request);
        } catch (const error& e) {
            ringsafe::read::header_read_failed(src, e);
        }
        s.got();
    }
    co_return s.finish();
}

}  // namespace ringsafe::asio::detail
