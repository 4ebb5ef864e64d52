// The one Catch2 main shared by every test program (compiled once), with the
// count of the test cases that said SKIP (skip.hpp): printed at the end as
// "ringsafe-test: N of M test cases skipped" (tools/scripts/test_counts.py
// reads it), and exit status 77 (meson: SKIP) when all of them did and none failed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <iostream>
#include <set>
#include <string>

#include "skip.hpp"

namespace {

std::string current_case;
std::set<std::string> skipped_cases;
std::size_t cases_run = 0;

struct skip_counter : Catch::TestEventListenerBase {
    using TestEventListenerBase::TestEventListenerBase;
    void testCaseStarting(const Catch::TestCaseInfo& info) override {
        current_case = info.name;
        ++cases_run;
    }
};

}  // namespace

CATCH_REGISTER_LISTENER(skip_counter)

void ringsafe::test::note_skipped(const std::string& why) {
    if (skipped_cases.insert(current_case).second) std::cout << "SKIPPED: " << current_case << ": " << why << std::endl;
}

int main(int argc, char** argv) {
    const int failed = Catch::Session().run(argc, argv);
    if (skipped_cases.empty()) return failed;
    std::cout << "ringsafe-test: " << skipped_cases.size() << " of " << cases_run << " test cases skipped" << std::endl;
    return failed == 0 && skipped_cases.size() == cases_run ? 77 : failed;
}
