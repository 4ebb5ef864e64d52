#include "bench_command.hpp"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace ringsafe::bench {

double run_timed(const std::string& cmd, long* maxrss_kib) {
    const auto t0 = std::chrono::steady_clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    int st = 0;
    rusage ru{};
    if (pid < 0 || ::wait4(pid, &st, 0, &ru) < 0) {
        std::fprintf(stderr, "failed to run: %s\n", cmd.c_str());
        return -1;
    }
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (maxrss_kib) *maxrss_kib = ru.ru_maxrss;
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        std::fprintf(stderr, "failed (%d): %s\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1, cmd.c_str());
        return -1;
    }
    return t;
}

}  // namespace ringsafe::bench
