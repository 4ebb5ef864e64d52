// Shell commands as benchmark arms (fio, the CLI, aria2c, rclone, ...).
#pragma once

#include <string>

namespace ringsafe::bench {

// Runs `cmd` with /bin/sh; returns its wall seconds, or -1 when it failed (the
// failure is reported on stderr). `maxrss_kib`, when given, gets the child's peak RSS.
double run_timed(const std::string& cmd, long* maxrss_kib = nullptr);

}  // namespace ringsafe::bench
