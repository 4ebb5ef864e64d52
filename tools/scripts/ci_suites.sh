#!/usr/bin/env bash
# The hardening stages CI runs after the main test suite (tools/dev.sh test
# runs this when CI=true or with --all):
#   asan   the whole test suite under ASan+UBSan           (build-asan)
#   tsan   the concurrency tests under TSan                 (build-tsan)
#   fuzz   each libFuzzer target for FUZZ_SECONDS, JOBS at a time (build-asan)
#   soak   the soak suite for SOAK_SECONDS                  (build-asan)
# build-asan is one clang build at -O1 without debug info whose library also
# carries libFuzzer's coverage instrumentation, so the suite, the fuzzers and
# the soak share it (without clang: g++, and the fuzz stage is skipped). Both
# sanitizer builds are unity builds (-Dunity=on): a third less compile time.
# Each sanitizer test and each fuzz target run counts as one test. The last
# line printed is the combined "N passed, N failed, N skipped" of every stage
# plus the main suite's meson test log given as $1 and pytest's JUnit XML as $2
# (both optional).
#   STAGES="asan tsan fuzz soak"  FUZZ_SECONDS=10  SOAK_SECONDS=15  JOBS=2  (defaults;
#   STAGES="" runs no stage and only adds up $1 and $2)
# ci_suites.sh --prebuild LOG: only configures and builds build-asan and build-tsan,
# at the lowest CPU priority, output to LOG. tools/dev.sh starts it in the background
# while the main suite runs (pytest runs one test at a time and leaves a core idle),
# so that the stages find their builds done or nearly so.
set -uo pipefail
cd "$(dirname "$0")/../.."
# The meson of .venv (tools/dev.sh makes it), also when this script runs on its own.
[ -x .venv/bin/meson ] && PATH="$PWD/.venv/bin:$PATH"

MAIN_LOG=${1:-}
PYTEST_XML=${2:-}
STAGES=${STAGES-asan tsan fuzz soak}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
SOAK_SECONDS=${SOAK_SECONDS:-15}
SHARED=$(cd .. && pwd)/shared
JOBS=${JOBS:-2}
COUNTS=$(mktemp)
trap 'rm -f "$COUNTS"' EXIT
FUZZ_TARGETS=(header gguf index http_response response_verdict url sigv4 hub_url dequant)
have_clang() { command -v clang++-14 >/dev/null; }
# Sanitizer builds use clang when it is there (faster to build, and its TSan models fences).
SAN_CXX=c++
have_clang && SAN_CXX=clang++-14
# Options of both sanitizer builds. A unity build of 12 sources per file: the
# library's 185 s of compile CPU under ASan becomes 131 s (the Boost headers are
# parsed fewer times). With clang, lld (lld-14) links: 0.7 s against GNU ld's
# 2.5 s per ASan test program, and there are 40 of them.
# No Python extension there (an ASan build of it cannot load into a plain python).
SAN_OPTS=(-Db_lundef=false -Dbuildtype=plain -Doptimization=1 -Dbench=false -Dunity=on -Dunity_size=12 -Dpython=disabled)
have_clang && [ -x /usr/lib/llvm-14/bin/ld.lld ] && SAN_OPTS+=(-Dcpp_link_args=-fuse-ld=lld)
# tests/ubsan.supp: one false positive of UBSan's vptr check under fd exhaustion (see the file).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$PWD/tests/ubsan.supp"

# The TSan stage's programs tests/AREA/test_<name>, each run as test <name>; test_asio_http, test_asio_open
# and test_asio_writer also run as the asio_http_threads, asio_open_threads and
# asio_writer_threads tests. asio_teardown destroys io_contexts while the blocking pool
# still works for them; asio_resolve abandons a resolver thread's getaddrinfo and
# asio_resolve_shared has eight opens wait on one. stores_gcs: the event loops of one
# read share a gs:// object's OAuth token cache (a refresh per request in one case).
# device runs the staging pipeline against the stand-in's copier thread (the order of
# stream waits, copies and frees). stores/test_hub: the Hub's answers hook and cache
# entries shared by event loops and sources; stores/test_hub_cache: two writers of one
# cache entry while one of them publishes it. mapped_file: copy_to's and populate()'s threads.
# dequantize: dequantize()'s helpers and dequantize_queue's workers, submitters and waiters.
# thread_refusal: an index's open and read with each of their thread starts refused in turn.
# convert: ringsafe cp's pipeline (the reader's threads feeding the sink, dequantized as they land).
tsan_programs=(uring/test_file_source uring/test_ring_pool file/test_mapped_file read/test_reader_files
    read/test_thread_refusal write/test_writer_declared
    http/test_http_faults http/test_http_threads hardening/test_read_faults asio/test_asio asio/test_asio_http
    asio/test_asio_direct asio/test_asio_open asio/test_asio_writer asio/test_asio_writer_cancel
    asio/test_asio_teardown asio/test_asio_resolve stores/test_stores_gcs stores/test_hub stores/test_hub_cache
    device/test_device dequant/test_dequantize convert/test_convert)
TSAN_TARGETS=("${tsan_programs[@]/#/tests/}" tools/ringsafe tests/support/fault_server tests/support/hub_standin)

# Appends "passed failed skipped" of a meson test log to $COUNTS.
count_log() { python3 tools/scripts/test_counts.py --meson "$1" >>"$COUNTS"; }
stage() { echo "== ringsafe ci: $* ($(date -u +%T))" >&2; }

# Configures build-asan once: clang at -O1, no debug info, library with coverage for the fuzzers.
setup_asan() {
    [ -f build-asan/build.ninja ] && return 0
    local common=(-Db_sanitize=address,undefined "${SAN_OPTS[@]}")
    if have_clang; then
        CXX=clang++-14 meson setup build-asan "${common[@]}" -Dfuzz=true \
            "-Dcpp_args=-fsanitize=fuzzer-no-link -fno-sanitize=function" >/dev/null
    else
        meson setup build-asan "${common[@]}" >/dev/null
    fi
}

# Configures build-tsan once (the same options, TSan instead of ASan+UBSan).
setup_tsan() {
    [ -f build-tsan/build.ninja ] && return 0
    CXX=$SAN_CXX meson setup build-tsan -Db_sanitize=thread "${SAN_OPTS[@]}" >/dev/null
}

if [ "${1:-}" = --prebuild ]; then
    # Errors are not counted here: the stages build again and count a failure.
    exec >"${2:-/dev/null}" 2>&1 </dev/null
    stage "prebuilding build-asan and build-tsan in the background (nice 19)"
    case " $STAGES " in *" asan "* | *" fuzz "* | *" soak "*)
        if setup_asan; then nice -n 19 ninja -C build-asan -j"$JOBS"; fi ;;
    esac
    case " $STAGES " in *" tsan "*)
        if setup_tsan; then nice -n 19 ninja -C build-tsan -j"$JOBS" "${TSAN_TARGETS[@]}"; fi ;;
    esac
    stage "prebuild done"
    exit 0
fi

# Builds targets ($2...) in dir $1 and runs meson test there with the test names given after "--".
build_and_test() {
    local dir=$1; shift
    local targets=()
    while (($#)) && [ "$1" != -- ]; do targets+=("$1"); shift; done
    shift
    if ! ninja -C "$dir" -j"$JOBS" "${targets[@]}"; then echo "0 1 0" >>"$COUNTS"; return; fi
    meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 4 \
        --no-suite soak "$@"
    count_log "$dir/meson-logs/testlog.json"
}

# Runs fuzz target $1 for FUZZ_SECONDS on a fresh corpus; prints "passed failed skipped" to $2.
fuzz_one() {
    local t=$1 out=$2 corpus=build-asan/corpus/$1 log=build-asan/fuzz_$1.log
    rm -rf "$corpus" && mkdir -p "$corpus" build-asan/crashes
    case $t in
    header) cp "$SHARED"/conformance/*/*.safetensors "$corpus"/ 2>/dev/null ;;
    gguf) cp "$SHARED"/conformance-gguf/*/*.gguf "$corpus"/ 2>/dev/null ;;
    http_response) cp tests/fuzz/seeds/http/* "$corpus"/ ;;
    *) cp tests/fuzz/seeds/"$t"/* "$corpus"/ ;;
    esac
    if build-asan/tests/fuzz/fuzz_"$t" -max_total_time="$FUZZ_SECONDS" -timeout=30 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix=build-asan/crashes/"$t"- "$corpus" >"$log" 2>&1; then
        echo "fuzz_$t: $(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | grep -o '[0-9]*$') executions, no crash" >&2
        echo "1 0 0" >"$out"
    else
        echo "fuzz_$t: FAILED (see $log, build-asan/crashes/)" >&2
        grep -m3 -E "what\(\):|ERROR: |setup failed" "$log" >&2
        tail -30 "$log" >&2
        echo "0 1 0" >"$out"
    fi
}

for s in $STAGES; do
    case $s in
    asan)
        stage "whole test suite under ASan+UBSan"
        # Not the CLI sweeps (suite cli_sweep): http_conformance (316 CLI processes, 60 s
        # under ASan) and cli_format (325, 43 s) run over every conformance file paths
        # that test_conformance, the HTTP tests and the fuzzers run in-process here; the
        # CLI itself still runs under ASan in cli_load and writer_cli.
        if setup_asan; then build_and_test build-asan -- --no-suite cli_sweep; else echo "0 1 0" >>"$COUNTS"; fi
        ;;
    tsan)
        stage "concurrency tests under TSan"
        # tests/tsan.supp: TSan cannot see io_uring's kernel-side writes (see the file).
        if setup_tsan; then
            TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp" \
                build_and_test build-tsan "${TSAN_TARGETS[@]}" \
                -- "${tsan_programs[@]##*/test_}" asio_http_threads asio_open_threads asio_writer_threads \
                asio_resolve_shared
        else
            echo "0 1 0" >>"$COUNTS"
        fi
        ;;
    fuzz)
        stage "libFuzzer targets, ${FUZZ_SECONDS}s each, $JOBS at a time"
        if ! have_clang; then echo "0 0 ${#FUZZ_TARGETS[@]}" >>"$COUNTS"; continue; fi
        if ! setup_asan || ! ninja -C build-asan -j"$JOBS" "${FUZZ_TARGETS[@]/#/tests/fuzz/fuzz_}" >/dev/null; then
            echo "0 1 0" >>"$COUNTS"; continue
        fi
        results=()
        for t in "${FUZZ_TARGETS[@]}"; do
            while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
            results+=("$(mktemp)")
            fuzz_one "$t" "${results[-1]}" &
        done
        wait
        for r in "${results[@]}"; do cat "$r" >>"$COUNTS"; rm -f "$r"; done
        ;;
    soak)
        stage "soak suite for ${SOAK_SECONDS}s under ASan"
        if setup_asan && ninja -C build-asan -j"$JOBS" tests/hardening/test_soak; then
            RINGSAFE_SOAK_SECONDS=$SOAK_SECONDS meson test -C build-asan --no-rebuild --print-errorlogs --setup soak --suite soak
            count_log build-asan/meson-logs/testlog.json
        else
            echo "0 1 0" >>"$COUNTS"
        fi
        ;;
    *) echo "unknown stage $s" >&2; echo "0 1 0" >>"$COUNTS" ;;
    esac
done

[ -n "$MAIN_LOG" ] && [ -f "$MAIN_LOG" ] && count_log "$MAIN_LOG"
[ -n "$PYTEST_XML" ] && [ -f "$PYTEST_XML" ] && python3 tools/scripts/test_counts.py --junit "$PYTEST_XML" >>"$COUNTS"
awk '{p+=$1; f+=$2; s+=$3} END {printf "%d passed, %d failed, %d skipped\n", p, f, s; exit (f > 0)}' "$COUNTS"
