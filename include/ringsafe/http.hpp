// HTTP(S) and S3 objects as byte sources, read with parallel Range requests.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ringsafe/source.hpp"

namespace ringsafe {

// How remote objects are fetched.
struct http_options {
    unsigned connections_per_origin = 8;       // keep-alive connections per scheme://host:port
    std::uint64_t chunk_size = 8u << 20;       // ranges are split into requests of this size
    std::uint64_t prefetch = 256u << 10;       // first speculative Range request (size, ETag, header)
    std::string bearer_token;                  // "Authorization: Bearer ..." (dropped on cross-origin redirects)
    std::vector<std::pair<std::string, std::string>> headers;  // extra request headers
    std::chrono::milliseconds connect_timeout{10'000};
    std::chrono::milliseconds first_byte_timeout{30'000};
    std::chrono::milliseconds stall_timeout{30'000};
    unsigned max_attempts = 6;                 // per range, including the first
    unsigned max_redirects = 10;
    bool verify_peer = true;                   // TLS certificate and host-name verification
    std::string ca_file;                       // extra CA bundle (PEM); empty = system default
};

// Opens an http://, https:// or s3:// URL with one Range request of `prefetch` bytes.
std::unique_ptr<source> open_url(const std::string& url, const http_options& opts = {});

}  // namespace ringsafe
