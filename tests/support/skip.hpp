// SKIP(why): the running test case cannot run here (a kernel feature, a
// program, a device it needs is missing). Catch2 2.13 has no SKIP of its own:
// this one prints "SKIPPED: <test case>: <why>", returns from the function it
// is in (the TEST_CASE's body, or a void function that the body calls last),
// and the test program counts it
// (tests/support/catch_main.cpp): its closing line says how many test cases
// skipped, tools/scripts/test_counts.py counts them as skipped, and a
// program whose every test case skipped exits 77 (meson: SKIP).
#pragma once

#include <sstream>
#include <string>

namespace ringsafe::test {

// Records that the running test case skipped, and why (defined with the Catch2 runner).
void note_skipped(const std::string& why);

}  // namespace ringsafe::test

#define SKIP(...)                                         \
    do {                                                  \
        std::ostringstream ringsafe_skip_why_;            \
        ringsafe_skip_why_ << __VA_ARGS__;                \
        ::ringsafe::test::note_skipped(ringsafe_skip_why_.str()); \
        return;                                           \
    } while (false)
