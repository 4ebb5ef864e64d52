// A remote object as a ringsafe::source, whatever store named it: requests go
// to the object's URL (signed by its store's hook), with Range, over the
// connection pools and event loops of engine/http.
#include <deque>
#include <exception>
#include <mutex>
#include <utility>
#include <vector>


#include "source/async_source.hpp"
#include "http/connection.hpp"
#include "http/event_loops.hpp"
#include "http/fetch_pieces.hpp"
#include "http/fetch_run.hpp"
#include "http/http_source.hpp"
#include "http/http_settings.hpp"
#include "http/range_fetch.hpp"
#include "source/deferred_open.hpp"
#include "ringsafe/http.hpp"
#include "source/fork_generation.hpp"

namespace ringsafe {
namespace {

using namespace http;

// What the connection pools need to fetch the shared TLS context on first https use.
tls_settings tls_of(const http_options& o) { return {o.verify_peer, o.ca_file}; }

// A remote object: the blocking executor (execute) runs private event loops,
// one on the calling thread and threads-1 on threads of its own (event_loops);
// the asynchronous one (start_async) runs on the
// caller's executor with a connection pool bound to it.
class http_source final : public remote_source {
public:
    struct without_request {};
    // Everything before the first request: options, the object (URL, signing), TLS.
    http_source(const std::string& name, remote_object object, const http_options& opts, without_request)
        : name_(name), opts_(resolved(opts, name)), rng_(std::random_device{}()), object_(std::move(object)) {
        check_request_fields(opts_, name);
    }
    // resolved_http_options, with the URL in its errors.
    static http_options resolved(const http_options& o, const std::string& spec) {
        try {
            return resolved_http_options(o);
        } catch (const error& e) {
            throw error(e.code(), std::string(e.what()) + " (opening " + spec + ")");
        }
    }
    // The blocking open: the first request on the source's own event loop.
    http_source(const std::string& name, remote_object object, const http_options& opts)
        : http_source(name, std::move(object), opts, without_request{}) {
        loops_.run_first([this]() -> net::awaitable<void> { co_await first_request_on(loops_.first_pool(), nullptr); });
    }

    net::awaitable<void> first_request(net::any_io_executor ex, detail::abandon_list* abandon) override {
        co_await first_request_on(pool_for(ex), abandon);
    }

    const std::string& name() const noexcept override { return name_; }
    std::uint64_t size() const noexcept override { return size_; }
    std::span<const std::byte> prefix() const noexcept override { return prefix_; }
    source_hints hints() const noexcept override { return {opts_.chunk_size, 1}; }

    void read_exact(std::uint64_t offset, std::span<std::byte> dst) override {
        read_op op{offset, dst.size(), dst.data(), 0};
        execute({&op, 1}, io_control{});
    }

    void execute(std::span<const read_op> ops, const io_control& ctl) override {
        drop_inherited_connections();
        std::deque<piece> work = split_into_pieces(ops, size_, name_, opts_, ctl.describe);
        // This call's copy of the object's state (an async run may read it meanwhile).
        remote_object object = snapshot();
        std::exception_ptr failure;
        try {
            loops_.fetch(std::move(work), object, ops, ctl);
        } catch (...) {
            failure = std::current_exception();
        }
        {
            std::lock_guard lock(state_mutex_);
            object_.location = object.location;  // a redirect learned here serves later reads
        }
        if (failure) std::rethrow_exception(failure);
        if (ctl.cancel && ctl.cancel->load()) raise(errc::Cancelled, "reading " + name_ + " was cancelled");
    }

    std::shared_ptr<detail::async_run> start_async(const detail::async_context& ctx, std::span<const read_op> ops,
                                                   detail::async_callbacks cb) override {
        connection_pool& pool = pool_for(ctx.ex);
        auto run = std::make_shared<fetch_run>(snapshot(), pool, opts_, std::random_device{}(), ops, std::move(cb));
        run->start(ctx.ex, size_, name_);
        return run;
    }

private:
    // One speculative request: size, validators and the first bytes. With
    // `abandon` abandoned it returns early (the caller checks).
    net::awaitable<void> first_request_on(connection_pool& pool, detail::abandon_list* abandon) {
        prefix_.resize(std::max<std::uint64_t>(opts_.prefetch, 1));
        std::function<bool()> stop;
        if (abandon) stop = [abandon] { return abandon->abandoned(); };
        const std::uint64_t got = co_await fetch_range(fetch_context{object_, pool, opts_, rng_, abandon}, 0,
                                                       prefix_.size(), prefix_.data(), {}, stop);
        prefix_.resize(std::min<std::uint64_t>(got, opts_.prefetch));
        size_ = object_.size.value_or(0);
    }

    // In a fork() child the idle keep-alive connections and the event loops'
    // epoll/timer descriptors are shared with the parent: rebuild the loops'
    // descriptors and drop the child's copies of the connections (closing a
    // copy leaves the parent's connection open and untouched).
    void drop_inherited_connections() {
        const std::uint64_t gen = detail::fork_generation();
        if (gen == fork_generation_) return;
        fork_generation_ = gen;
        loops_.drop_inherited_connections();
    }

    // The connection pool of an asynchronous executor (made on first use, kept).
    connection_pool& pool_for(const net::any_io_executor& ex) {
        std::lock_guard lock(state_mutex_);
        for (auto& [pool_ex, p] : async_pools_)
            if (pool_ex == ex) return *p;
        async_pools_.emplace_back(ex, std::make_unique<connection_pool>(ex, tls_of(opts_), opts_.connect_timeout));
        return *async_pools_.back().second;
    }

    remote_object snapshot() {
        std::lock_guard lock(state_mutex_);
        return object_;
    }

    std::string name_;
    http_options opts_;
    std::minstd_rand rng_;
    // The blocking executor's event loops (loop 0 on the calling thread).
    http::event_loops loops_{opts_};
    std::uint64_t fork_generation_ = detail::fork_generation();  // of loops_
    std::mutex state_mutex_;  // object_ after construction, async_pools_
    remote_object object_;
    // Connection pools of the asynchronous executor, one per executor (each
    // used only on its executor).
    std::vector<std::pair<net::any_io_executor, std::unique_ptr<connection_pool>>> async_pools_;
    std::vector<std::byte> prefix_;
    std::uint64_t size_ = 0;
};

}  // namespace

std::unique_ptr<remote_source> http::open_remote(const std::string& name, remote_object object, const http_options& opts) {
    return std::make_unique<http_source>(name, std::move(object), opts);
}

std::unique_ptr<remote_source> http::prepare_remote(const std::string& name, remote_object object,
                                                    const http_options& opts) {
    return std::make_unique<http_source>(name, std::move(object), opts, http_source::without_request{});
}

}  // namespace ringsafe
