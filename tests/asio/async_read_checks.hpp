// What the Asio tests share: one zeroed buffer per selected tensor, and a
// recorder of async_read's progress callbacks that checks each call as it
// arrives (on the expected thread, progress rising, zero-byte tensors first).
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "checkpoint_bytes.hpp"
#include "ringsafe/asio.hpp"

namespace ringsafe::test {

// One zeroed buffer per tensor of `sel`, in selection order.
struct tensor_buffers {
    std::vector<std::vector<std::byte>> bufs;
    std::vector<std::span<std::byte>> spans;
    tensor_buffers(const reader& r, const selection& sel) {
        for (auto i : sel.indices()) bufs.emplace_back(r.tensors()[i].size(), std::byte{0});
        for (auto& b : bufs) spans.emplace_back(b);
    }
    // Whether target k holds its tensor's bytes.
    bool holds(const reader& r, const selection& sel, std::size_t k) const {
        const auto& t = r.tensors()[sel.indices()[k]];
        return bufs[k] == tensor_bytes(t.name, t.size());
    }
    // CHECKs every target's bytes.
    void check(const reader& r, const selection& sel) const {
        for (std::size_t k = 0; k < sel.size(); ++k) {
            INFO(r.tensors()[sel.indices()[k]].name);
            CHECK(holds(r, sel, k));
        }
    }
};

// Records the read_callbacks of one async_read of `sel` into `b`. Every call
// must come from the constructing thread (else `elsewhere`), progress must
// rise, and a zero-byte tensor must be reported before any progress.
// `on_call` (optional) runs at each call, e.g. to sample the thread count.
struct progress_recorder {
    const reader& r;
    const selection& sel;
    const tensor_buffers& b;
    std::function<void()> on_call;
    std::thread::id home = std::this_thread::get_id();
    bool elsewhere = false;
    std::uint64_t last = 0, total = 0;  // the latest progress report
    unsigned calls = 0;                 // progress reports
    std::vector<unsigned> finished;     // on_tensor_done calls per target
    std::vector<bool> complete_then;    // the target held its bytes when reported

    progress_recorder(const reader& rd, const selection& s, const tensor_buffers& bufs, std::function<void()> each = {})
        : r(rd), sel(s), b(bufs), on_call(std::move(each)), finished(s.size(), 0), complete_then(s.size(), false) {}

    // Callbacks writing into this recorder, which must outlive the read.
    asio::read_callbacks callbacks() {
        asio::read_callbacks cb;
        cb.on_progress = [this](std::uint64_t done, std::uint64_t all) {
            note_call();
            CHECK(done > last);
            last = done;
            total = all;
            ++calls;
        };
        cb.on_tensor_done = [this](std::size_t target, const tensor_info& t) {
            note_call();
            REQUIRE(target < sel.size());
            CHECK(t.name == r.tensors()[sel.indices()[target]].name);
            ++finished[target];
            complete_then[target] = b.holds(r, sel, target);
            if (t.size() == 0) CHECK(calls == 0);  // zero-byte targets come first
        };
        return cb;
    }
    // CHECKs that every target was reported once, complete, and that the last report covered `n` bytes.
    void check_complete(std::uint64_t n) const {
        CHECK(last == n);
        CHECK(total == n);
        for (std::size_t k = 0; k < sel.size(); ++k) {
            INFO(r.tensors()[sel.indices()[k]].name);
            CHECK(finished[k] == 1);
            CHECK(complete_then[k]);
        }
    }

private:
    void note_call() {
        elsewhere |= std::this_thread::get_id() != home;
        if (on_call) on_call();
    }
};

// Starts one async_read per tensor of `r`, all at once, each into its own
// buffer with callbacks `cb`; runs `io` on this thread and a second one, then
// CHECKs that every read succeeded with the tensor's bytes.
inline void read_every_tensor_on_two_threads(boost::asio::io_context& io, asio::async_reader& r,
                                             const asio::read_callbacks& cb = {}) {
    const auto& tensors = r.get().tensors();
    std::vector<std::vector<std::byte>> bufs(tensors.size());
    std::atomic<unsigned> ok{0};
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        bufs[i].resize(tensors[i].size());
        asio::async_read(r, r.get().select({tensors[i].name}), {std::span<std::byte>(bufs[i])}, cb,
                         [&, i](asio::error_code ec, std::size_t n) {
                             if (!ec && n == bufs[i].size()) ++ok;
                         });
    }
    std::thread second([&] { io.run(); });
    io.run();
    second.join();
    CHECK(ok == tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        INFO(tensors[i].name);
        CHECK(bufs[i] == tensor_bytes(tensors[i].name, tensors[i].size()));
    }
}

}  // namespace ringsafe::test
