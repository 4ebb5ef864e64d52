#!/usr/bin/env python3
"""Counts test results for tools/dev.sh and tools/scripts/ci_suites.sh.

  test_counts.py --meson testlog.json [--junit pytest.xml] [--total]
      prints "passed failed skipped" (or, with --total, "N passed, N failed,
      N skipped" and exit status 1 when anything failed) over meson test logs
      and pytest JUnit XML files; a missing file counts nothing. A meson test
      counts once (a program that exits 77 as skipped); the Catch2 test cases
      that said SKIP in a program that passed count as skipped besides (its
      "ringsafe-test: N of M test cases skipped" line, tests/support/skip.hpp).
  test_counts.py --has-tests BUILD_DIR
      exit status 0 when the meson build dir was configured with -Dtests=true.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


SKIPPED_CASES = re.compile(r"^ringsafe-test: (\d+) of \d+ test cases skipped$", re.M)


def meson_counts(path):
    p = f = s = 0
    for line in open(path):
        test = json.loads(line)
        r = test["result"]
        if r in ("OK", "EXPECTEDFAIL"):
            p += 1
            s += sum(int(n) for n in SKIPPED_CASES.findall(test.get("stdout") or ""))
        elif r == "SKIP":
            s += 1
        else:
            f += 1
    return p, f, s


def junit_counts(path):
    p = f = s = 0
    for case in ET.parse(path).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        if kinds & {"failure", "error"}:
            f += 1
        elif "skipped" in kinds:
            # pytest writes an xfail as <skipped type="pytest.xfail">: an expected failure passes.
            if any(c.get("type") == "pytest.xfail" for c in case if c.tag == "skipped"):
                p += 1
            else:
                s += 1
        else:
            p += 1
    return p, f, s


def has_tests(build):
    out = subprocess.run(["meson", "introspect", build, "--buildoptions"], capture_output=True, text=True)
    if out.returncode:
        return False
    return any(o["name"] == "tests" and o["value"] for o in json.loads(out.stdout))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--meson", action="append", default=[])
    ap.add_argument("--junit", action="append", default=[])
    ap.add_argument("--total", action="store_true")
    ap.add_argument("--has-tests")
    a = ap.parse_args()
    if a.has_tests:
        sys.exit(0 if has_tests(a.has_tests) else 1)
    total = [0, 0, 0]
    for files, count in ((a.meson, meson_counts), (a.junit, junit_counts)):
        for path in files:
            if os.path.exists(path):
                for i, n in enumerate(count(path)):
                    total[i] += n
    if a.total:
        print(f"{total[0]} passed, {total[1]} failed, {total[2]} skipped")
        sys.exit(1 if total[1] else 0)
    print(*total)


if __name__ == "__main__":
    main()
