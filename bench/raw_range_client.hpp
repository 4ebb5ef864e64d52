// The loopback ceiling for bench_http: a minimal HTTP/1.1 client that sends
// Range GETs over keep-alive connections (one thread each) and recv()s each
// body straight into the destination. No parsing beyond finding the end of
// the response header; no validation beyond the status line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ringsafe::bench {

// Fetches [0, size) of http://127.0.0.1:port<path> into dst in `chunk`-byte
// ranges over `connections` connections. Throws std::runtime_error on failure.
void raw_range_fetch(std::uint16_t port, const std::string& path, std::uint64_t size, std::byte* dst,
                     unsigned connections, std::uint64_t chunk);

}  // namespace ringsafe::bench
