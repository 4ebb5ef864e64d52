// dequantize_queue::submit when memory runs out (its own program: it replaces
// operator new, allocation_meter.cpp): a submit that fails queues none of its
// job, so nothing writes the buffers of a tensor the caller was told was
// refused; one whose thread could not be started still completes in wait().
#include <catch2/catch.hpp>

#include <atomic>
#include <vector>

#include "allocation_meter.hpp"
#include "ringsafe/dequantize.hpp"

using namespace ringsafe;

TEST_CASE("a submit that runs out of memory queues none of its job; one that succeeds completes") {
    // 8 MiB of float32 from zero Q8_0 blocks (0.0f each): 32 pieces with 8
    // threads, more than one allocation of the queue's list of pieces holds.
    const std::size_t blocks_n = 65536;
    const std::vector<std::byte> blocks(blocks_n * 34, std::byte{0});
    const std::vector<std::byte> zeros(blocks_n * 32 * 4, std::byte{0});
    const std::vector<std::byte> untouched(zeros.size(), std::byte{0x77});
    std::vector<std::byte> out;
    dequantize_queue q(8);
    std::size_t refused = 0;
    for (std::size_t n = 0;; ++n) {
        INFO("allocation " << n << " of the submit fails");
        out = untouched;
        std::atomic<int> done{0};
        dequantize_job job{ggml_type::Q8_0, blocks, dtype::F32, out, "blk.0.ffn_up.weight",
                           [&done] { done.fetch_add(1); }};
        status st;
        bool ok = false, failed = false;
        {
            test::allocation_failure f(n);
            ok = q.submit(std::move(job), st);
            failed = f.happened();
        }
        q.wait();
        if (ok) {
            CHECK(done.load() == 1);
            REQUIRE(out == zeros);
        } else {
            ++refused;
            CHECK(st.code == make_error_code(errc::InvalidArgument));
            CHECK_THAT(st.message, Catch::Contains("out of memory"));
            CHECK(done.load() == 0);
            REQUIRE(out == untouched);
        }
        if (!failed) break;  // the submit made at most n allocations: each has failed once
    }
    CHECK(refused >= 2);  // the job itself, and the list's growth
}
