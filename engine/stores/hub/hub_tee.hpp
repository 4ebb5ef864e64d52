// What one read of a Hub source (an execute(), an asynchronous run) does with
// its bytes as they land, on a thread of its own so that it overlaps the rest
// of the download: each piece (one Range request's worth, whose bytes land in
// order from its start) is written into the cache entry once all of it
// landed, and the digest is fed the contiguous prefix as it grows, from the
// caller's memory, within pieces still landing too (stores/hub/blob_digest.hpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "ringsafe/http.hpp"
#include "ringsafe/source.hpp"
#include "stores/hub/blob_digest.hpp"
#include "stores/hub/hub_cache.hpp"

namespace ringsafe::stores {

// A read's ops cut into the requests engine/http makes of them (it leaves each
// whole): pieces[i] lies within ops[op_of[i]], with its tag and destination.
struct tee_pieces {
    std::vector<read_op> pieces;
    std::vector<std::size_t> op_of;
};

// `ops` of a file of `size` bytes named `name` (`o` resolved) cut as
// engine/http cuts them; `hashed`: cut instead so that the file lands about
// front to back with small requests last (guided self-scheduling: each
// remaining/(2 x connections) bytes, from 1 MiB up to engine/http's own request
// size), so that the digest's prefix grows during the download and little is
// left to hash once the last bytes land. Throws Truncated naming the op and
// `name` for an op beyond `size`, as engine/http does.
tee_pieces cut_for_tee(std::span<const read_op> ops, std::uint64_t size, const std::string& name, const http_options& o,
                       bool hashed, const std::function<std::string(std::uint32_t)>& describe);

class hub_tee {
public:
    // `pieces`: the read's ops as engine/http cuts them into requests
    // (cut_for_tee), which must outlive the tee; `entry` (the cache's) and
    // `digest` may each be null.
    hub_tee(std::shared_ptr<hub_cache_entry> entry, std::shared_ptr<blob_digest> digest, std::span<const read_op> pieces);
    // Without finish(): stops the thread, writing and hashing nothing more (a failed read).
    ~hub_tee();
    hub_tee(const hub_tee&) = delete;
    hub_tee& operator=(const hub_tee&) = delete;

    // `bytes` more of pieces[piece] landed, after those before (io_control::on_bytes; any thread).
    void landed(std::size_t piece, std::uint64_t bytes);
    // After every piece landed: joins the thread, hashes and writes what it has
    // not; throws the first write's error.
    void finish();

private:
    void run();
    void stop();
    // Feeds the digest every landed byte that continues its prefix.
    void advance();

    std::shared_ptr<hub_cache_entry> entry_;
    std::shared_ptr<blob_digest> digest_;
    std::span<const read_op> pieces_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> landed_;
    std::vector<std::size_t> order_;  // pieces by offset
    std::size_t cursor_ = 0;          // advance()'s place in order_ (the thread's, then finish()'s)
    std::vector<char> written_;       // by the thread, read after it joined
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<std::size_t> ready_;   // pieces landed whole, to write
    bool nudged_ = false;             // more bytes of some piece landed: the prefix may grow
    bool stopping_ = false, abandoned_ = false;
    std::exception_ptr failed_;
    std::thread thread_;
};

}  // namespace ringsafe::stores
