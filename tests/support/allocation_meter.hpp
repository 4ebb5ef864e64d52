// Counts heap bytes allocated through operator new in the test program that
// includes allocation_meter.cpp (it replaces the global operator new/delete),
// so a test can assert "this call never held more than X bytes at once"; and
// makes an allocation fail on demand, so a test can see what a call does then.
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

// Makes one allocation through operator new on the calling thread throw
// std::bad_alloc while it lives: the `n`th from now (0: the next one).
class allocation_failure {
public:
    explicit allocation_failure(std::size_t n);
    ~allocation_failure();
    allocation_failure(const allocation_failure&) = delete;
    allocation_failure& operator=(const allocation_failure&) = delete;
    // True once that allocation has failed (the thread made more than `n`).
    bool happened() const;
};

}  // namespace ringsafe::test
