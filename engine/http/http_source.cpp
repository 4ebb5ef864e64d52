// ringsafe::open_url: a remote object as a ringsafe::source.
#include <atomic>
#include <deque>
#include <exception>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include "http/connection.hpp"
#include "http/range_fetch.hpp"
#include "http/s3_object.hpp"
#include "ringsafe/http.hpp"

namespace ringsafe {
namespace {

using namespace http_engine;

std::unique_ptr<asio::ssl::context> make_tls_context(const http_options& o) {
    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    ctx->set_default_verify_paths(ec);
    if (!o.ca_file.empty()) {
        ctx->load_verify_file(o.ca_file, ec);
        if (ec) raise(errc::InvalidArgument, "cannot load CA file '" + o.ca_file + "': " + ec.message());
    }
    ctx->set_verify_mode(o.verify_peer ? asio::ssl::verify_peer : asio::ssl::verify_none);
    return ctx;
}

// One piece of work: a chunk of one op.
struct piece {
    std::size_t op_index;
    std::uint64_t offset, length;
    std::byte* dst;
};

class http_source final : public source {
public:
    http_source(const std::string& spec, const http_options& opts) : name_(spec), opts_(opts), rng_(std::random_device{}()) {
        if (opts_.connections_per_origin == 0) raise(errc::InvalidArgument, "connections_per_origin must be at least 1 for " + spec);
        if (opts_.chunk_size == 0) raise(errc::InvalidArgument, "chunk_size must be positive for " + spec);
        url u = parse_url(spec);
        if (u.scheme == "s3")
            object_ = make_s3_object(u, opts_.s3);
        else
            object_.requested = object_.location = u;
        tls_ = make_tls_context(opts_);
        pool_ = std::make_unique<connection_pool>(io_.get_executor(), tls_.get(), opts_.connect_timeout);
        // One speculative request: size, validators and the first bytes.
        prefix_.resize(std::max<std::uint64_t>(opts_.prefetch, 1));
        std::uint64_t got = 0;
        run([&]() -> asio::awaitable<void> {
            got = co_await fetch_range(context(), 0, prefix_.size(), prefix_.data(), {}, {});
        });
        prefix_.resize(std::min<std::uint64_t>(got, opts_.prefetch));
        size_ = object_.size.value_or(0);
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
        std::deque<piece> work;
        // Requests of chunk_size, smaller when that would leave connections idle.
        std::uint64_t total = 0;
        for (const auto& op : ops) total += op.length;
        const std::uint64_t per_connection = (total + opts_.connections_per_origin - 1) / opts_.connections_per_origin;
        const std::uint64_t chunk = std::max<std::uint64_t>(std::min(opts_.chunk_size, per_connection), std::min<std::uint64_t>(opts_.chunk_size, 256u << 10));
        for (std::size_t i = 0; i < ops.size(); ++i) {
            const auto& op = ops[i];
            if (op.offset > size_ || op.length > size_ - op.offset)
                raise(errc::Truncated, label(ctl, op) + "bytes " + std::to_string(op.offset) + "+" +
                                           std::to_string(op.length) + " lie beyond the end of " + name_ + " (" +
                                           std::to_string(size_) + " bytes)");
            for (std::uint64_t at = 0; at < op.length; at += chunk)
                work.push_back({i, op.offset + at, std::min(chunk, op.length - at), op.dst + at});
        }
        std::exception_ptr first_error;
        bool failed = false;
        auto stop = [&] { return failed || (ctl.cancel && ctl.cancel->load(std::memory_order_relaxed)); };
        auto worker = [&]() -> asio::awaitable<void> {
            while (!work.empty() && !stop()) {
                piece p = work.front();
                work.pop_front();
                std::function<void(std::uint64_t)> progress;
                if (ctl.on_bytes) progress = [&ctl, i = p.op_index](std::uint64_t n) { ctl.on_bytes(i, n); };
                try {
                    co_await fetch_range(context(), p.offset, p.length, p.dst, progress, stop);
                } catch (const error& e) {
                    throw error(e.code(), label(ctl, ops[p.op_index]) + e.what());
                }
            }
        };
        const std::size_t workers = std::min<std::size_t>(opts_.connections_per_origin, work.size());
        for (std::size_t w = 0; w < workers; ++w)
            asio::co_spawn(io_, worker(), [&](std::exception_ptr e) {
                if (e && !first_error) first_error = e;
                if (e) failed = true;
            });
        io_.restart();
        io_.run();
        if (first_error) std::rethrow_exception(first_error);
        if (ctl.cancel && ctl.cancel->load()) raise(errc::Cancelled, "reading " + name_ + " was cancelled");
    }

private:
    fetch_context context() { return {object_, *pool_, opts_, rng_}; }

    static std::string label(const io_control& ctl, const read_op& op) {
        return ctl.describe ? ctl.describe(op.tag) + ": " : std::string();
    }

    // Runs one coroutine to completion on the source's event loop.
    void run(std::function<asio::awaitable<void>()> fn) {
        std::exception_ptr err;
        asio::co_spawn(io_, fn(), [&](std::exception_ptr e) { err = e; });
        io_.restart();
        io_.run();
        if (err) std::rethrow_exception(err);
    }

    std::string name_;
    http_options opts_;
    std::minstd_rand rng_;
    asio::io_context io_{1};
    std::unique_ptr<asio::ssl::context> tls_;
    std::unique_ptr<connection_pool> pool_;
    remote_object object_;
    std::vector<std::byte> prefix_;
    std::uint64_t size_ = 0;
};

}  // namespace

std::unique_ptr<source> open_url(const std::string& url, const http_options& opts) {
    return std::make_unique<http_source>(url, opts);
}

}  // namespace ringsafe
