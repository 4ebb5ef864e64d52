// Result rows of bench_read: repetitions, medians, the table, JSON lines and targets.
#pragma once

#include <string>
#include <vector>

namespace ringsafe::bench {

// One arm of one case: its repetitions in GB/s (10^9 bytes/s).
struct arm_result {
    std::string case_name;
    std::string arm;
    std::string dst_pages;  // what backs the destination: THP, 4KiB, fio-internal, ...
    double bytes = 0;
    std::vector<double> gbps;
    std::string note;
    double median() const;
    double min() const;
    double max() const;
};

// Prints one case's rows as a table (ratio column against `reference` arm) and one JSON line per row.
void print_case(const std::vector<arm_result>& rows, const std::string& reference);

// A target: measured = numerator / denominator (medians) against `need`.
struct target {
    std::string name;
    double measured = 0;
    double need = 0;
    bool at_most = false;  // true: PASS when measured <= need
    bool known = true;     // false when an arm could not run
};
// Prints the targets with PASS/MISS as a table and JSON lines.
void print_targets(const std::vector<target>& targets);

}  // namespace ringsafe::bench
