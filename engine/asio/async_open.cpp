// async_open: the blocking reader::open's steps as coroutines on a strand of
// the caller's executor (io_uring operations for files, the first request
// of each URL over the executor's connection pool); custom opens
// (reader_options::open) on the blocking pool.
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "asio/blocking_pool.hpp"
#include "asio/context_life.hpp"
#include "asio/open_steps.hpp"
#include "asio/reader_access.hpp"
#include "asio/reader_state.hpp"
#include "format/error_context.hpp"

namespace ringsafe::asio::detail {
namespace net = boost::asio;
namespace {

// The shards of an index or the parts of a split GGUF set, opened by up to
// `parallel` coroutines at once (all but `skip`, which the caller holds).
struct shard_batch {
    shard_batch(const engine_strand& s, std::vector<std::string> v, std::size_t skip_)
        : specs(std::move(v)), skip(skip_), out(specs.size()), all_done(s, net::steady_timer::time_point::max()) {}
    std::vector<std::string> specs;
    std::size_t skip;
    std::vector<ringsafe::read::opened_shard> out;
    std::size_t next = 0;
    std::size_t workers_left = 0;
    net::steady_timer all_done;  // cancelled by the last worker
};

net::awaitable<void> shard_worker(std::shared_ptr<open_context> c, std::shared_ptr<shard_batch> b) {
    for (std::size_t i; !c->abandon.abandoned() && (i = b->next++) < b->out.size();) {
        if (i == b->skip) continue;
        auto& o = b->out[i];
        try {
            o.spec = b->specs[i];
            o.src = co_await open_one(*c, o.spec);
            o.hdr = co_await load_header_async(*c, *o.src);
        } catch (...) {
            o.err = std::current_exception();
        }
    }
}

net::awaitable<std::vector<ringsafe::read::opened_shard>> open_shards_async(std::shared_ptr<open_context> c,
                                                                              std::vector<std::string> specs,
                                                                              std::size_t parallel,
                                                                              std::size_t skip = std::size_t(-1)) {
    auto b = std::make_shared<shard_batch>(c->strand, std::move(specs), skip);
    const std::size_t workers = std::min<std::size_t>(b->out.size(), parallel);
    b->workers_left = workers;
    for (std::size_t w = 0; w < workers; ++w)
        net::co_spawn(c->strand, shard_worker(c, b), [b](std::exception_ptr) {
            if (--b->workers_left == 0) b->all_done.cancel();
        });
    if (b->workers_left > 0) {
        boost::system::error_code ignored;
        co_await b->all_done.async_wait(net::redirect_error(net::use_awaitable, ignored));
    }
    c->check_cancelled();
    co_return std::move(b->out);
}

// reader::open, step for step.
net::awaitable<void> open_reader(std::shared_ptr<open_context> c, std::string spec, std::optional<reader>& result) {
    auto p = ringsafe::read::new_reader_state(spec, c->ropts);
    auto src = co_await open_one(*c, spec);
    const std::string opened = ringsafe::read::opened_spec(*p, spec, *src);  // hf://ORG/NAME -> ...@COMMIT/FILE
    if (looks_like_index(opened, src->prefix(), src->size())) {
        ringsafe::read::index_text t = ringsafe::read::begin_index_text(*src, c->ropts.parse.max_header_size);
        if (!t.rest().empty()) co_await read_exact_async(*c, *src, t.rest_offset(), t.rest());
        src.reset();
        shard_index idx = parse_index(t.text, opened);
        std::vector<std::string> specs;
        for (auto& s : idx.shards) specs.push_back(resolve_shard(opened, s));
        auto out = co_await open_shards_async(c, std::move(specs), ringsafe::read::parallel_opens(*p, spec));
        ringsafe::read::adopt_shards(*p, opened, idx, std::move(out));
    } else {
        ringsafe::read::shard_header h = co_await load_header_async(*c, *src);
        auto set = ringsafe::read::split_parts(*p, opened, *src, h);
        if (set.parts.empty()) {
            ringsafe::read::set_single_file(*p, std::move(src), std::move(h));
        } else {
            // A part of a split GGUF set: the other parts as an index's shards (as reader::open).
            auto out = co_await open_shards_async(c, set.parts, ringsafe::read::parallel_opens(*p, spec), set.self);
            out[set.self] = ringsafe::read::opened_shard{opened, std::move(src), std::move(h), nullptr};
            ringsafe::read::adopt_split(*p, opened, std::move(out));
        }
    }
    result.emplace(ringsafe::detail::reader_access::make(std::move(p)));
}

// The error and message reader::open(spec, opts, st) reports for `e`.
void describe_failure(std::exception_ptr e, const std::string& spec, std::error_code& ec, std::string& msg) {
    try {
        std::rethrow_exception(e);
    } catch (const std::system_error& x) {
        ec = x.code();
        msg = ringsafe::format::bare_message(x);
    } catch (const std::exception& x) {
        ec = make_error_code(errc::IoError);
        msg = spec + ": " + x.what();
    } catch (...) {
        ec = make_error_code(errc::IoError);
        msg = spec + ": unknown failure";
    }
}

void finish(status* st, const error_code& ec, std::string msg, const net::any_io_executor& done_ex,
            open_handler handler, async_reader result) {
    if (st) {
        st->code = static_cast<std::error_code>(ec);
        st->message = ec ? std::move(msg) : std::string();
    }
    net::post(done_ex, net::append(std::move(handler), ec, std::move(result)));
}

// What a custom open holds of the caller's io_context, parked with it
// (context_life.hpp) while the open runs on the blocking pool.
struct pool_open_completion {
    async_reader::executor_type ex;
    async_options aopts;
    status* st;
    net::any_io_executor done_ex;
    net::executor_work_guard<net::any_io_executor> work;  // io_context::run() keeps going
    open_handler handler;
};

// Custom sources: their open blocks, so it runs on the blocking pool. Its
// completion reaches the io_context only if that is still alive; otherwise
// the handler went with the io_context (destroyed, never run) and the reader
// opened here is closed on the pool thread.
void open_on_pool(async_reader::executor_type ex, std::string spec, reader_options ropts, async_options aopts,
                  status* st, net::any_io_executor done_ex, open_handler handler) {
    auto life = life_of(net::query(done_ex, net::execution::context));
    auto work = net::make_work_guard(done_ex);
    const context_life::ticket t = life->park(pool_open_completion{std::move(ex), aopts, st, std::move(done_ex),
                                                                   std::move(work), std::move(handler)});
    net::post(blocking_pool(), [life = std::move(life), t, spec = std::move(spec), ropts = std::move(ropts)] {
        std::error_code ec;
        std::string msg;
        std::optional<reader> opened;
        try {
            opened.emplace(reader::open(spec, ropts));
        } catch (...) {
            describe_failure(std::current_exception(), spec, ec, msg);
        }
        life->claim<pool_open_completion>(t, [&](pool_open_completion c) {
            async_reader result;
            if (opened) {
                try {
                    result = async_reader(c.ex, std::move(*opened), c.aopts);
                } catch (...) {
                    describe_failure(std::current_exception(), spec, ec, msg);
                }
            }
            finish(c.st, ec, std::move(msg), c.done_ex, std::move(c.handler), std::move(result));
            c.work.reset();
        });
    });
}

}  // namespace

void start_open(async_reader::executor_type ex, std::string spec, reader_options ropts, async_options aopts,
                status* st, net::any_io_executor done_ex, open_handler handler) {
    if (ropts.open)
        return open_on_pool(std::move(ex), std::move(spec), std::move(ropts), aopts, st, std::move(done_ex),
                            std::move(handler));
    auto c = std::make_shared<open_context>(open_context{net::make_strand(ex), nullptr, std::move(ropts), {}});
    try {
        c->ring = make_event_ring(c->strand, aopts.queue_depth);
    } catch (...) {
        std::error_code ec;
        std::string msg;
        describe_failure(std::current_exception(), spec, ec, msg);
        return finish(st, ec, std::move(msg), done_ex, std::move(handler), async_reader());
    }
    net::cancellation_slot slot = net::get_associated_cancellation_slot(handler);
    if (slot.is_connected()) {
        slot.assign([w = std::weak_ptr<open_context>(c), strand = c->strand](net::cancellation_type t) {
            using ct = net::cancellation_type;
            if ((t & (ct::terminal | ct::partial | ct::total)) == ct::none) return;
            net::post(strand, [w] {
                if (auto c = w.lock()) c->abandon.abandon();
            });
        });
    }
    auto result = std::make_shared<std::optional<reader>>();
    auto work = net::make_work_guard(done_ex);
    net::co_spawn(c->strand, open_reader(c, spec, *result),
                  [c, result, ex = std::move(ex), spec, st, done_ex = std::move(done_ex), work = std::move(work),
                   handler = std::move(handler)](std::exception_ptr e) mutable {
                      auto slot = net::get_associated_cancellation_slot(handler);
                      if (slot.is_connected()) slot.clear();
                      std::error_code ec;
                      std::string msg;
                      async_reader opened;
                      error_code code;
                      if (c->abandon.abandoned()) {
                          code = net::error::operation_aborted;
                          msg = "opening " + spec + " was cancelled";
                      } else if (e) {
                          describe_failure(e, spec, ec, msg);
                          code = ec;
                      } else {
                          opened = async_reader(ex, std::make_shared<async_reader::impl>(c->strand, c->ring,
                                                                                          std::move(**result)));
                      }
                      finish(st, code, std::move(msg), done_ex, std::move(handler), std::move(opened));
                      work.reset();
                  });
}

}  // namespace ringsafe::asio::detail
