#!/usr/bin/env python3
"""Prints the ninja targets of build dir $1 that CI's release run needs: every
target built by default except the test programs of suites it does not run.

In CI the C++ suite runs once, under ASan+UBSan (tools/scripts/ci_suites.sh);
the release build runs only the suites a sanitizer build leaves out or cannot
judge (tools/dev.sh: install, cli_sweep, peak_rss) and pytest. A test program
that is no test's program of those suites is not built there, except the ones
pytest runs itself (KEPT).

  ci_targets.py BUILD_DIR SUITE[,SUITE...]
"""

import json
import os
import subprocess
import sys

# C++ test programs that tests/python runs (test_gguf_written.py: the GGUF
# writer's tests keep the files they write, for gguf-py to read back).
KEPT = {"tests/write/test_gguf_writer"}


def introspect(build, what):
    out = subprocess.check_output(["meson", "introspect", what, build])  # the meson on PATH (.venv's)
    return json.loads(out)


def main():
    build = os.path.realpath(sys.argv[1])
    suites = {s.strip() for s in sys.argv[2].split(",") if s.strip()}
    kept_programs, left_programs = set(), set()
    for t in introspect(build, "--tests"):
        program = os.path.realpath(t["cmd"][0])
        # meson names suites PROJECT:SUITE
        if {s.split(":")[-1] for s in t["suite"]} & suites:
            kept_programs.add(program)
        else:
            left_programs.add(program)
    left_programs -= kept_programs
    left_programs -= {os.path.join(build, k) for k in KEPT}
    targets = []
    for t in introspect(build, "--targets"):
        if not t.get("build_by_default", True):
            continue
        for f in t["filename"]:
            if os.path.realpath(f) not in left_programs:
                targets.append(os.path.relpath(f, build))
    if not targets:
        sys.exit("ci_targets.py: no targets found in " + build)
    print("\n".join(sorted(set(targets))))


if __name__ == "__main__":
    main()
