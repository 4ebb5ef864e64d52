// Printing bench_read's results.
#include "bench_report.hpp"

#include <algorithm>
#include <cstdio>

namespace ringsafe::bench {
namespace {

std::string json_escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    return o;
}

}  // namespace

double arm_result::median() const {
    if (gbps.empty()) return 0;
    auto v = gbps;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}
double arm_result::min() const { return gbps.empty() ? 0 : *std::min_element(gbps.begin(), gbps.end()); }
double arm_result::max() const { return gbps.empty() ? 0 : *std::max_element(gbps.begin(), gbps.end()); }

void print_case(const std::vector<arm_result>& rows, const std::string& reference) {
    if (rows.empty()) return;
    double ref = 0;
    for (const auto& r : rows)
        if (r.arm == reference) ref = r.median();
    std::printf("\n## %s (%.0f MB per rep)\n", rows[0].case_name.c_str(), rows[0].bytes / 1e6);
    std::printf("| %-34s | %-12s | %7s | %7s | %7s | %11s |\n", "arm", "dst pages", "median", "min", "max",
                "ringsafe/x");
    std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(36, '-').c_str(), std::string(14, '-').c_str(),
                std::string(9, '-').c_str(), std::string(9, '-').c_str(), std::string(9, '-').c_str(),
                std::string(13, '-').c_str());
    for (const auto& r : rows) {
        const double m = r.median();
        if (r.gbps.empty()) {
            std::printf("| %-34s | %-12s | %7s | %7s | %7s | %11s | %s\n", r.arm.c_str(), r.dst_pages.c_str(), "-", "-",
                        "-", "-", r.note.c_str());
            continue;
        }
        std::printf("| %-34s | %-12s | %7.2f | %7.2f | %7.2f | %10.2fx |\n", r.arm.c_str(), r.dst_pages.c_str(), m,
                    r.min(), r.max(), m > 0 ? ref / m : 0);
    }
    for (const auto& r : rows) {
        std::printf("{\"case\":\"%s\",\"arm\":\"%s\",\"dst_pages\":\"%s\",\"bytes\":%.0f,\"reps\":%zu,"
                    "\"gbps_median\":%.3f,\"gbps_min\":%.3f,\"gbps_max\":%.3f,\"ratio_ringsafe_over_arm\":%.3f",
                    json_escape(r.case_name).c_str(), json_escape(r.arm).c_str(), r.dst_pages.c_str(), r.bytes,
                    r.gbps.size(), r.median(), r.min(), r.max(), r.median() > 0 ? ref / r.median() : 0.0);
        if (!r.note.empty()) std::printf(",\"note\":\"%s\"", json_escape(r.note).c_str());
        std::printf("}\n");
    }
    std::fflush(stdout);
}

void print_targets(const std::vector<target>& targets) {
    std::printf("\n## Targets\n| %-58s | %9s | %9s | %-4s |\n|%s|%s|%s|%s|\n", "target", "measured", "need", "",
                std::string(60, '-').c_str(), std::string(11, '-').c_str(), std::string(11, '-').c_str(),
                std::string(6, '-').c_str());
    for (const auto& t : targets) {
        const bool pass = t.known && (t.at_most ? t.measured <= t.need : t.measured >= t.need);
        std::printf("| %-58s | %9.3f | %s%8.3f | %-4s |\n", t.name.c_str(), t.measured, t.at_most ? "<=" : ">=",
                    t.need, t.known ? (pass ? "PASS" : "MISS") : "n/a");
    }
    for (const auto& t : targets) {
        const bool pass = t.known && (t.at_most ? t.measured <= t.need : t.measured >= t.need);
        std::printf("{\"target\":\"%s\",\"measured\":%.4f,\"need\":%.4f,\"at_most\":%s,\"result\":\"%s\"}\n",
                    json_escape(t.name).c_str(), t.measured, t.need, t.at_most ? "true" : "false",
                    t.known ? (pass ? "PASS" : "MISS") : "n/a");
    }
    std::fflush(stdout);
}

}  // namespace ringsafe::bench
