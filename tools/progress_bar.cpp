// A one-line progress bar on stderr.
#include "progress_bar.hpp"

#include <unistd.h>

#include <cstdio>

#include "args.hpp"

namespace ringsafe::cli {

bool stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

progress_bar::progress_bar(std::uint64_t total, bool enabled) : total_(total), enabled_(enabled) {}

progress_bar::~progress_bar() {
    if (enabled_ && !finished_) std::fputc('\n', stderr);
}

void progress_bar::update(std::uint64_t done) {
    if (!enabled_) return;
    for (auto cur = done_.load(); done > cur && !done_.compare_exchange_weak(cur, done);) {
    }
    std::unique_lock lk(draw_, std::try_to_lock);
    if (!lk) return;
    auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    draw(done_.load());
}

void progress_bar::finish() {
    if (!enabled_ || finished_) return;
    std::lock_guard lk(draw_);
    draw(done_.load());
    std::fputc('\n', stderr);
    finished_ = true;
}

void progress_bar::draw(std::uint64_t done) {
    constexpr int width = 30;
    const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
    const int fill = static_cast<int>(frac * width);
    std::string bar(static_cast<std::size_t>(fill), '=');
    if (fill < width) bar += '>';
    bar.resize(width, ' ');
    std::fprintf(stderr, "\r[%s] %3d%%  %s / %s  ", bar.c_str(), static_cast<int>(frac * 100),
                 human_bytes(done).c_str(), human_bytes(total_).c_str());
    std::fflush(stderr);
}

}  // namespace ringsafe::cli
