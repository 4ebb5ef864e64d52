// A local safetensors file opened for `ls` and `verify`: reads only the length
// prefix and the header, and hashes tensor bytes in bounded chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ringsafe/header.hpp"
#include "ringsafe/source.hpp"

namespace ringsafe::cli {

class header_file {
public:
    // Opens `path` (or an http(s)/s3 URL, read through open_source) and parses
    // its header, reading exactly 8 + N bytes.
    // Throws ringsafe::error (a format kind, or system_category naming the path).
    explicit header_file(const std::string& path, const parse_options& opts = {});
    ~header_file();
    header_file(const header_file&) = delete;
    header_file& operator=(const header_file&) = delete;

    const ringsafe::header& header() const noexcept { return header_; }
    std::uint64_t size() const noexcept { return size_; }

    // Lowercase hex SHA-256 of each tensor's bytes, in header().tensors order.
    // Reads the data section once, front to back, through one `chunk`-byte
    // buffer. Throws Truncated if the file shrank, system errors naming the path.
    std::vector<std::string> sha256_per_tensor(std::size_t chunk = 4u << 20) const;

private:
    void read_at(void* buf, std::size_t len, std::uint64_t offset, const char* what) const;

    std::string path_;
    int fd_ = -1;
    std::unique_ptr<source> remote_;  // set for URLs
    std::uint64_t size_ = 0;
    ringsafe::header header_;
};

}  // namespace ringsafe::cli
