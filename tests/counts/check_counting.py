#!/usr/bin/env python3
"""How a SKIP is counted (tests/support/skip.hpp): the probe's runs and their exit
status, then tools/scripts/test_counts.py over a meson log holding them.

  check_counting.py PROBE TEST_COUNTS_PY
"""
import json
import os
import subprocess
import sys
import tempfile


def run(probe, *args):
    r = subprocess.run([probe, *args], capture_output=True, text=True)
    return r.returncode, r.stdout


def main(probe, counts):
    failures, checks = [], []

    def expect(what, ok):
        checks.append(what)
        if not ok:
            failures.append(what)

    rc, both = run(probe)
    expect(f"a run with a skipped case exits 0 (got {rc})", rc == 0)
    expect("it names the case and the reason", "SKIPPED: probe: a case that cannot run here: the probe's reason" in both)
    expect("it counts the skipped cases", "ringsafe-test: 1 of 2 test cases skipped" in both)
    rc, skips = run(probe, "[skips]")
    expect(f"a run whose every case skipped exits 77 (got {rc})", rc == 77)
    rc, runs = run(probe, "[runs]")
    expect(f"a run without a skip exits 0 and says nothing of skips (got {rc})", rc == 0 and "ringsafe-test" not in runs)

    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "testlog.json")
        with open(log, "w") as f:
            for result, out in (("OK", both), ("SKIP", skips), ("OK", runs), ("FAIL", "")):
                f.write(json.dumps({"name": "probe", "result": result, "stdout": out}) + "\n")
        out = subprocess.run([sys.executable, counts, "--meson", log], capture_output=True, text=True).stdout.split()
        # passed: the two OK programs; failed: one; skipped: the skipped program and the skipped case.
        expect(f"test_counts.py counts 2 passed, 1 failed, 2 skipped (got {out})", out == ["2", "1", "2"])

    for f in failures:
        print("FAILED:", f)
    print(f"{len(checks) - len(failures)} of {len(checks)} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
