// The watch over one response body: a stall (no byte for stall_timeout) and a
// transfer too slow to be worth waiting for (curl's --speed-limit/--speed-time
// model: under low_speed_limit bytes/s on average over a low_speed_time
// window) both close the connection, which ends the pending read; the caller
// then asks stalled() / too_slow() why. One timer for the whole body, woken at
// the next deadline, so a read costs no timer re-arm.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include <boost/asio/steady_timer.hpp>

#include "http/connection.hpp"

namespace ringsafe::http {

class body_watchdog {
public:
    // Starts watching `c` (which must outlive the watchdog): `stall` with no
    // byte, or fewer than min_rate * window bytes in a `window` (min_rate 0 or
    // a zero window: no speed check). Runs on `c`'s executor.
    body_watchdog(connection& c, std::chrono::milliseconds stall, std::uint64_t min_rate,
                  std::chrono::milliseconds window);
    ~body_watchdog();
    body_watchdog(const body_watchdog&) = delete;
    body_watchdog& operator=(const body_watchdog&) = delete;

    // `n` bytes arrived: the stall clock starts again, the window counts them.
    void progress(std::uint64_t n) noexcept;
    // Why the watchdog closed the connection, if it did.
    bool stalled() const noexcept { return st_->stalled.load(std::memory_order_relaxed); }
    bool too_slow() const noexcept { return st_->slow.load(std::memory_order_relaxed); }

private:
    using clock = std::chrono::steady_clock;
    struct state {
        state(connection& c, std::chrono::milliseconds s, std::uint64_t rate, std::chrono::milliseconds w)
            : conn(&c), stall(s), min_rate(rate), window(w), timer(c.lowest().get_executor()) {}
        std::atomic<connection*> conn;  // null once the body is over
        std::chrono::milliseconds stall;
        std::uint64_t min_rate;
        std::chrono::milliseconds window;
        net::steady_timer timer;
        std::atomic<clock::rep> last{0};       // time of the last progress
        std::atomic<std::uint64_t> bytes{0};   // received so far
        clock::time_point window_start;        // the timer's handler alone uses these two
        std::uint64_t window_bytes = 0;
        std::atomic<bool> stalled{false}, slow{false};
    };
    static void arm(const std::shared_ptr<state>& st);

    std::shared_ptr<state> st_;
};

}  // namespace ringsafe::http
