// A test program with one passing and one skipping test case, for
// check_counting.py: what the runner (catch_main.cpp) and
// tools/scripts/test_counts.py make of a SKIP.
#include <catch2/catch.hpp>

#include "skip.hpp"

TEST_CASE("probe: a case that runs", "[runs]") { CHECK(1 + 1 == 2); }

TEST_CASE("probe: a case that cannot run here", "[skips]") {
    SKIP("the probe's " << "reason");
    FAIL("SKIP returns from the test case");
}
