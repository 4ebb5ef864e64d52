// Tests for include/ringsafe/dequantize.hpp's dequantize_queue: tensors
// submitted from several threads come out as dequantize() makes them, each
// on_done once; wait_for, cancel and the destructor keep their word; an
// on_done's exception reaches wait(); bad jobs are refused at submit.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "ringsafe/dequantize.hpp"
#include "test_support.hpp"

using namespace ringsafe;
using namespace std::chrono_literals;

namespace {

// A tensor of `blocks` Q4_K blocks of pattern bytes (any bytes are valid input).
struct tensor {
    std::vector<std::byte> blocks;
    std::vector<std::byte> out, expected;
    tensor(std::size_t blocks_n, std::uint64_t seed, dtype o) : blocks(blocks_n * 144) {
        test::fill_pattern(blocks, seed);
        const std::size_t size = blocks_n * 256 * (o == dtype::F32 ? 4 : 2);
        out.assign(size, std::byte{0});
        expected.assign(size, std::byte{0});
        dequantize(ggml_type::Q4_K, blocks, o, expected, 1);
    }
};

// A gate on_done callbacks wait at until it opens.
struct gate {
    std::mutex m;
    std::condition_variable cv;
    bool open = false;
    void pass() {
        std::unique_lock lock(m);
        cv.wait(lock, [this] { return open; });
    }
    void release() {
        std::lock_guard lock(m);
        open = true;
        cv.notify_all();
    }
};

}  // namespace

TEST_CASE("tensors submitted from several threads are dequantized as dequantize() does, each on_done once") {
    std::vector<tensor> ts;
    for (std::size_t i = 0; i < 24; ++i)
        ts.emplace_back(1 + 97 * (i % 5), i, i % 3 == 0 ? dtype::F32 : i % 3 == 1 ? dtype::F16 : dtype::BF16);
    std::vector<std::atomic<int>> done(ts.size());
    dequantize_queue q(3);
    std::vector<std::thread> submitters;
    for (int s = 0; s < 4; ++s)
        submitters.emplace_back([&, s] {
            for (std::size_t i = std::size_t(s); i < ts.size(); i += 4) {
                const dtype o = i % 3 == 0 ? dtype::F32 : i % 3 == 1 ? dtype::F16 : dtype::BF16;
                q.submit({ggml_type::Q4_K, ts[i].blocks, o, ts[i].out, "t" + std::to_string(i),
                          [&done, i] { done[i].fetch_add(1); }});
            }
        });
    for (auto& s : submitters) s.join();
    q.wait();
    for (std::size_t i = 0; i < ts.size(); ++i) {
        INFO("tensor " << i);
        CHECK(done[i].load() == 1);
        CHECK(ts[i].out == ts[i].expected);
    }
    // The queue is reusable after a wait, and an empty tensor completes too.
    bool empty_done = false;
    q.submit({ggml_type::Q8_0, {}, dtype::F32, {}, "empty", [&] { empty_done = true; }});
    q.wait();
    CHECK(empty_done);
}

TEST_CASE("wait_for returns false while a job is unfinished, true once it is") {
    tensor t(8, 1, dtype::F32);
    gate g;
    std::atomic<bool> in_on_done{false};
    dequantize_queue q(2);
    q.submit({ggml_type::Q4_K, t.blocks, dtype::F32, t.out, "held", [&] {
                  in_on_done = true;
                  g.pass();
              }});
    // A worker took it (a waiter that helps would run the on_done itself).
    REQUIRE(test::eventually([&] { return in_on_done.load(); }, 60s));
    CHECK_FALSE(q.wait_for(20ms));  // its on_done is held at the gate
    g.release();
    CHECK(q.wait_for(60s));
    CHECK(t.out == t.expected);
}

TEST_CASE("an exception from on_done reaches wait() once; the other jobs still complete") {
    tensor a(4, 2, dtype::F32), b(4, 3, dtype::F32);
    dequantize_queue q(2);
    q.submit({ggml_type::Q4_K, a.blocks, dtype::F32, a.out, "a", [] { throw std::runtime_error("on_done of a"); }});
    q.submit({ggml_type::Q4_K, b.blocks, dtype::F32, b.out, "b", {}});
    CHECK_THROWS_WITH(q.wait(), "on_done of a");
    CHECK_NOTHROW(q.wait());
    CHECK(a.out == a.expected);
    CHECK(b.out == b.expected);
}

TEST_CASE("cancel drops queued pieces; after the destructor nothing writes the buffers") {
    // A large tensor (32 MiB of float32, many pieces) behind a job whose
    // on_done holds the only worker: its pieces stay queued until cancelled.
    tensor held(4, 4, dtype::F32);
    std::vector<std::byte> big_blocks(512 * 64 * 144);
    test::fill_pattern(big_blocks, 5);
    std::vector<std::byte> big_out(512 * 64 * 256 * 4, std::byte{0x77});
    gate g;
    std::atomic<bool> in_on_done{false}, big_done{false};
    {
        dequantize_queue q(1);
        q.submit({ggml_type::Q4_K, held.blocks, dtype::F32, held.out, "held", [&] {
                      in_on_done = true;
                      g.pass();
                  }});
        REQUIRE(test::eventually([&] { return in_on_done.load(); }, 60s));
        q.submit({ggml_type::Q4_K, big_blocks, dtype::F32, big_out, "big", [&] { big_done = true; }});
        q.cancel();
        g.release();
        q.wait();
        CHECK_FALSE(big_done.load());
        // Nothing ran of it: its only worker was held, and wait() found the queue empty.
        for (std::size_t i = 0; i < big_out.size(); i += 4096) REQUIRE(big_out[i] == std::byte{0x77});
        // Jobs submitted after a cancel run as usual.
        q.submit({ggml_type::Q4_K, big_blocks, dtype::F32, big_out, "again", [&] { big_done = true; }});
    }  // the destructor drops what is queued and waits for what runs
    const std::vector<std::byte> after = big_out;
    std::this_thread::sleep_for(50ms);
    CHECK(after == big_out);
}

TEST_CASE("a bad job is refused at submit, naming the tensor") {
    dequantize_queue q;
    std::vector<std::byte> blocks(144 * 2), small(100);
    auto e = test::expect_error([&] { q.submit({ggml_type::Q4_K, blocks, dtype::F32, small, "blk.0.attn_q.weight", {}}); });
    CHECK(e.code() == make_error_code(errc::BufferTooSmall));
    CHECK_THAT(e.what(), Catch::Contains("tensor 'blk.0.attn_q.weight' (Q4_K)"));
    status st;
    CHECK_FALSE(q.submit({ggml_type::Q8_1, blocks, dtype::F32, small, "x", {}}, st));
    CHECK(st.code == make_error_code(errc::InvalidArgument));
    CHECK_THAT(st.message, Catch::Contains("tensor 'x' (Q8_1)"));
    q.wait();
}
