// shared_tls_context: one TLS client context per (verify_peer, CA file), built lazily.
#include "http/tls_context.hpp"

#include <sys/stat.h>

#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

#include "ringsafe/error.hpp"

namespace ringsafe::http {
namespace {

namespace ssl = boost::asio::ssl;

// (verify_peer, ca_file, its dev, ino, size, mtime ns)
using cache_key = std::tuple<bool, std::string, std::uint64_t, std::uint64_t, std::int64_t, std::int64_t>;

std::mutex cache_mutex;
std::map<cache_key, std::shared_ptr<ssl::context>>& cache() {
    static auto* m = new std::map<cache_key, std::shared_ptr<ssl::context>>;  // never destroyed: used until exit
    return *m;
}
std::atomic<std::size_t> built{0};

std::shared_ptr<ssl::context> build(const tls_settings& s, const std::string& where) {
    auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                     ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    ctx->set_default_verify_paths(ec);
    if (!s.ca_file.empty()) {
        ctx->load_verify_file(s.ca_file, ec);
        if (ec)
            raise(errc::InvalidArgument, "cannot load CA file '" + s.ca_file + "' for " + where + ": " + ec.message());
    }
    ctx->set_verify_mode(s.verify_peer ? ssl::verify_peer : ssl::verify_none);
    built.fetch_add(1, std::memory_order_relaxed);
    return ctx;
}

}  // namespace

std::shared_ptr<ssl::context> shared_tls_context(const tls_settings& s, const std::string& where) {
    cache_key key{s.verify_peer, s.ca_file, 0, 0, 0, 0};
    if (!s.ca_file.empty()) {
        struct stat st {};
        if (::stat(s.ca_file.c_str(), &st) == 0)
            key = {s.verify_peer, s.ca_file, st.st_dev, st.st_ino, st.st_size,
                   std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    }
    // Building under the lock: concurrent first https connects wait for one
    // build instead of each paying for their own.
    std::lock_guard lock(cache_mutex);
    auto& slot = cache()[key];
    if (!slot) {
        try {
            slot = build(s, where);
        } catch (...) {
            cache().erase(key);
            throw;
        }
    }
    return slot;
}

std::size_t tls_contexts_built() noexcept { return built.load(std::memory_order_relaxed); }

}  // namespace ringsafe::http
