// HTTP(S), S3, GCS, Azure Blob and Hugging Face Hub objects as byte sources, read with
// parallel Range requests: the transport's options, shared by every remote source.
// open_url (open_source.hpp) opens one; each store's own options (credentials,
// endpoints) are in stores.hpp.
//
//   auto src = ringsafe::open_url("https://host/model.safetensors");  // one request: size, ETag, header
//   src->execute(ops, ctl);   // ranges split into chunk_size requests over keep-alive connections
//
// Bodies land straight in the caller's buffers (no staging copy). Every
// response must be a 206 whose Content-Range is exactly the range asked;
// anything else is an error naming the URL and range, never a write outside
// the destination. Requests after the first carry If-Match / If-Range with the
// first response's ETag (or Last-Modified), so an object that changes while it
// is read is reported (errc::ObjectChanged), never mixed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ringsafe/source.hpp"

namespace ringsafe {

// Bounds and defaults of http_options::connections_per_origin, threads and chunk_size.
inline constexpr unsigned max_connections_per_origin = 256;
inline constexpr unsigned max_http_threads = 256;
inline constexpr unsigned default_connections_per_origin = 32;            // measured: see README, "Performance"
inline constexpr std::uint64_t min_http_chunk_size = 4u << 10;
inline constexpr std::uint64_t max_http_chunk_size = 1u << 30;
inline constexpr std::uint64_t default_http_chunk_size = 32u << 20;       // amortises a 50 ms first byte at 100 MB/s

// How remote objects are fetched. Defaults suit an object store (S3-like:
// 50-100 MB/s per connection, 20-50 ms to the first byte).
struct http_options {
    // Keep-alive connections per scheme://host:port, 1..max_connections_per_origin;
    // 0: the environment's RINGSAFE_CONNECTIONS, else default_connections_per_origin.
    unsigned connections_per_origin = 0;
    // Ranges are split into requests of at most this size, min_http_chunk_size..max_http_chunk_size;
    // 0: the environment's RINGSAFE_CHUNK (a size: 8M, 64M, 1G), else default_http_chunk_size.
    std::uint64_t chunk_size = 0;
    // Event loops of a blocking read (execute/read_exact), 1..max_http_threads: the calling
    // thread runs one, threads-1 threads started by the read (joined before it returns) run the
    // others, each with its share of the connections (a read of fewer requests than threads
    // uses fewer). 0: the environment's RINGSAFE_HTTP_THREADS, else the machine's hardware
    // threads; capped at connections_per_origin.
    // Asynchronous reads (engine/asio) run one loop on the caller's executor whatever this is.
    unsigned threads = 0;
    std::uint64_t prefetch = 256u << 10;       // size of the first, speculative Range request (size, ETag, header)
    std::string bearer_token;                  // "Authorization: Bearer ..."; dropped when a redirect changes origin
    std::vector<std::pair<std::string, std::string>> headers;  // extra request headers; all dropped when a redirect changes origin
    // Names (any case) of `headers` still sent after a redirect to another origin
    // (scheme, host or port); "Authorization" keeps the bearer token too. S3 signatures never follow.
    std::vector<std::string> cross_origin_headers;
    // Follow a redirect from https to http; false: refused with HttpError naming both URLs.
    // A Location of any other scheme (s3://, ftp://, file:, ...) is refused whatever this says.
    bool allow_https_downgrade = false;
    std::chrono::milliseconds connect_timeout{10'000};     // host-name resolution (HttpError past it), then TCP connect + TLS handshake
    std::chrono::milliseconds first_byte_timeout{30'000};  // request sent -> response header complete
    std::chrono::milliseconds stall_timeout{30'000};       // no body bytes for this long
    // Minimum transfer speed (curl's --speed-limit / --speed-time): a response body that
    // averages under low_speed_limit bytes/s over a low_speed_time window is abandoned and
    // resumed like a stalled one. 0 (either): no speed check.
    std::uint64_t low_speed_limit = 1024;
    std::chrono::milliseconds low_speed_time{30'000};
    unsigned max_attempts = 6;                 // tries per range without progress (a try that delivers bytes resets it)
    unsigned max_total_attempts = 20;          // failed tries per range in all, progress or not (resumptions included)
    std::chrono::milliseconds retry_base_delay{200};       // backoff: base * 2^(failures-1), with jitter
    std::chrono::milliseconds retry_max_delay{10'000};     // backoff cap (a longer Retry-After is honoured up to 60 s)
    unsigned max_redirects = 10;               // 301/302/303/307/308 to http(s) Locations followed per request
    bool verify_peer = true;                   // TLS certificate and host-name verification
    std::string ca_file;                       // extra CA bundle (PEM) trusted besides the system's; empty = system only
};

// `o` with connections_per_origin, threads and chunk_size resolved (0 takes the
// environment variable, else the default; threads capped at the connections).
// Throws InvalidArgument naming the option or variable and its value when out
// of range or malformed.
http_options resolved_http_options(const http_options& o);

}  // namespace ringsafe
