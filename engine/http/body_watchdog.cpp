// One timer per response body for the stall timeout and the minimum speed (body_watchdog.hpp).
#include "http/body_watchdog.hpp"

#include <algorithm>

namespace ringsafe::http {

body_watchdog::body_watchdog(connection& c, std::chrono::milliseconds stall, std::uint64_t min_rate,
                             std::chrono::milliseconds window)
    : st_(std::make_shared<state>(c, stall, min_rate, window)) {
    st_->window_start = clock::now();
    progress(0);
    arm(st_);
}

body_watchdog::~body_watchdog() {
    st_->conn.store(nullptr, std::memory_order_relaxed);
    st_->timer.cancel();
}

void body_watchdog::progress(std::uint64_t n) noexcept {
    st_->bytes.fetch_add(n, std::memory_order_relaxed);
    st_->last.store(clock::now().time_since_epoch().count(), std::memory_order_relaxed);
}

void body_watchdog::arm(const std::shared_ptr<state>& st) {
    const bool speed = st->min_rate > 0 && st->window.count() > 0;
    const clock::time_point last{clock::duration(st->last.load(std::memory_order_relaxed))};
    clock::time_point wake = last + st->stall;
    if (speed) wake = std::min(wake, st->window_start + st->window);
    st->timer.expires_at(wake);
    st->timer.async_wait([st, speed](const boost::system::error_code& ec) {
        connection* c = st->conn.load(std::memory_order_relaxed);
        if (ec || !c) return;
        const auto now = clock::now();
        const clock::time_point seen{clock::duration(st->last.load(std::memory_order_relaxed))};
        if (now - seen >= st->stall) {
            st->stalled.store(true, std::memory_order_relaxed);
            c->close();
            return;
        }
        if (speed && now >= st->window_start + st->window) {
            const std::uint64_t bytes = st->bytes.load(std::memory_order_relaxed);
            // Bytes the window needed at min_rate (as a double: rate x milliseconds may pass 2^64).
            const double needed = static_cast<double>(st->min_rate) * static_cast<double>(st->window.count()) / 1000.0;
            if (static_cast<double>(bytes - st->window_bytes) < needed) {
                st->slow.store(true, std::memory_order_relaxed);
                c->close();
                return;
            }
            st->window_start = now;
            st->window_bytes = bytes;
        }
        arm(st);
    });
}

}  // namespace ringsafe::http
