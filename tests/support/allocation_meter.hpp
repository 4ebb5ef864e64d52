// Counts heap bytes allocated through operator new in the test program that
// includes allocation_meter.cpp (it replaces the global operator new/delete),
// so a test can assert "this call never held more than X bytes at once".
#pragma once

#include <cstddef>

namespace ringsafe::test {

// Measures the peak of live heap bytes above the level at construction.
class allocation_meter {
public:
    allocation_meter();
    // Highest live heap bytes seen since construction, minus the starting level.
    std::size_t peak() const;

private:
    std::size_t start_;
};

}  // namespace ringsafe::test
