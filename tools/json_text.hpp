// JSON text of what a file holds (the --json contract): strings whose bytes
// need not be UTF-8, and doubles written exactly.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace ringsafe::cli {

// Appends `text` as a JSON string (Boost.JSON's escaping); each byte that is
// not part of strict UTF-8 becomes U+FFFD, as Python's errors="replace" does.
void append_json_string(std::string& out, std::string_view text);

// Appends `v` in the shortest form that reads back as the same double
// (0.10000000149011612, 10000, 1e+300); JSON has no NaN or infinities, so
// those are the strings "NaN", "Infinity" and "-Infinity".
void append_json_number(std::string& out, double v);

// Output gathered into blocks of about 64 KiB, written to `out` as they fill.
class block_writer {
public:
    explicit block_writer(std::FILE* out) : out_(out) {}
    ~block_writer() { flush(); }
    block_writer(const block_writer&) = delete;
    block_writer& operator=(const block_writer&) = delete;
    std::string& text() noexcept { return buf_; }
    void maybe_flush() {
        if (buf_.size() >= (64u << 10)) flush();
    }
    void flush() {
        if (!buf_.empty()) std::fwrite(buf_.data(), 1, buf_.size(), out_);
        buf_.clear();
    }

private:
    std::FILE* out_;
    std::string buf_;
};

}  // namespace ringsafe::cli
