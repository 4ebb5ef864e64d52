// A one-line progress bar on stderr for long reads; thread-safe updates.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace ringsafe::cli {

// Draws "[=====>    ]  42%  1.23 GiB / 2.93 GiB" on stderr, redrawing at most
// every 100 ms. Disabled (draws nothing) when `enabled` is false, e.g. when
// stderr is not a terminal.
class progress_bar {
public:
    progress_bar(std::uint64_t total, bool enabled);
    ~progress_bar();
    // Records `done` bytes; callable from any thread (drawing is skipped when
    // another thread is drawing).
    void update(std::uint64_t done);
    // Draws the final state and ends the line.
    void finish();

private:
    void draw(std::uint64_t done);
    std::uint64_t total_;
    bool enabled_;
    bool finished_ = false;
    std::atomic<std::uint64_t> done_{0};
    std::mutex draw_;
    std::chrono::steady_clock::time_point last_{};
};

// True when stderr is a terminal.
bool stderr_is_tty();

}  // namespace ringsafe::cli
