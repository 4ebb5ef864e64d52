// Process-wide cache of TLS client contexts (engine-internal). Building one
// loads the system's CA store (SSL_CTX_set_default_verify_paths, ~50 ms), so
// it is done once per (verify_peer, ca_file) and only when an https origin is
// first connected; plain http never builds one.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

namespace ringsafe::http {

// What a TLS client context depends on (from http_options).
struct tls_settings {
    bool verify_peer = true;
    std::string ca_file;  // extra CA bundle (PEM); empty = system store only
};

// The shared context for `s`, built on first use (TLS 1.2+, system CA store,
// plus s.ca_file, verify mode per s.verify_peer) and kept for the process.
// A ca_file is identified by its path and its inode, size and mtime, so a
// replaced file is loaded again. Thread-safe. Throws ringsafe::error
// InvalidArgument naming the CA file and `where` (the origin) when it cannot
// be loaded; a failure is not cached.
std::shared_ptr<boost::asio::ssl::context> shared_tls_context(const tls_settings& s, const std::string& where);

// How many contexts shared_tls_context() has built in this process (for tests).
std::size_t tls_contexts_built() noexcept;

}  // namespace ringsafe::http
