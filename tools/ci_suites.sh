#!/usr/bin/env bash
# The hardening stages CI runs after the main test suite (tools/dev.sh test
# runs this when CI=true or with --all):
#   asan   the whole test suite under ASan+UBSan        (build-asan)
#   tsan   the concurrency tests under TSan              (build-tsan)
#   fuzz   each libFuzzer target for FUZZ_SECONDS         (build-fuzz, clang 14)
#   soak   the soak suite for SOAK_SECONDS               (build-asan)
# Each sanitizer test and each fuzz target run counts as one test. The last
# line printed is the combined "N passed, N failed, N skipped" of every stage
# plus the main suite's meson test log given as $1 (optional).
#   STAGES="asan tsan fuzz soak"  FUZZ_SECONDS=20  SOAK_SECONDS=20  (defaults)
set -uo pipefail
cd "$(dirname "$0")/.."

MAIN_LOG=${1:-}
STAGES=${STAGES:-asan tsan fuzz soak}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
SOAK_SECONDS=${SOAK_SECONDS:-20}
SHARED=$(cd .. && pwd)/shared
JOBS=${JOBS:-2}
COUNTS=$(mktemp)
trap 'rm -f "$COUNTS"' EXIT

# Appends "passed failed skipped" of a meson test log to $COUNTS.
count_log() {
    python3 - "$1" >>"$COUNTS" <<'PY'
import json, sys
p = f = s = 0
for line in open(sys.argv[1]):
    r = json.loads(line)["result"]
    if r in ("OK", "EXPECTEDFAIL"): p += 1
    elif r == "SKIP": s += 1
    else: f += 1
print(p, f, s)
PY
}
stage() { echo "== ringsafe ci: $* ($(date -u +%T))" >&2; }

# Setup + build a sanitizer dir and run meson tests in it; $1 dir, $2 sanitizer, rest: test names (none = all).
sanitizer_stage() {
    local dir=$1 san=$2; shift 2
    local targets=()
    [ -f "$dir/build.ninja" ] || meson setup "$dir" -Db_sanitize="$san" -Db_lundef=false \
        -Dbuildtype=debugoptimized -Dbench=false >/dev/null || { echo "0 1 0" >>"$COUNTS"; return; }
    for t in "$@"; do targets+=("tests/test_$t"); done
    if ((${#targets[@]})); then targets+=(tools/ringsafe tests/fault_server); fi
    if ! ninja -C "$dir" -j"$JOBS" "${targets[@]}"; then echo "0 1 0" >>"$COUNTS"; return; fi
    meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 4 \
        --no-suite soak "$@"
    count_log "$dir/meson-logs/testlog.json"
}

for s in $STAGES; do
    case $s in
    asan)
        stage "whole test suite under ASan+UBSan"
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
            sanitizer_stage build-asan address,undefined
        ;;
    tsan)
        stage "concurrency tests under TSan"
        # tests/tsan.supp: TSan cannot see io_uring's kernel-side writes (see the file).
        TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp" \
            sanitizer_stage build-tsan thread file_source reader_files writer_declared http_faults read_faults
        ;;
    fuzz)
        stage "libFuzzer targets, ${FUZZ_SECONDS}s each"
        if ! command -v clang++-14 >/dev/null; then echo "0 0 5" >>"$COUNTS"; continue; fi
        [ -f build-fuzz/build.ninja ] || CXX=clang++-14 meson setup build-fuzz -Dfuzz=true -Dtests=false \
            -Dbench=false -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized \
            "-Dcpp_args=-fsanitize=fuzzer-no-link -fno-sanitize=function" >/dev/null
        for t in header index http_response url sigv4; do
            corpus=build-fuzz/corpus/$t
            rm -rf "$corpus" && mkdir -p "$corpus" build-fuzz/crashes
            case $t in
            header) cp "$SHARED"/conformance/*/*.safetensors "$corpus"/ 2>/dev/null ;;
            http_response) cp tests/fuzz/seeds/http/* "$corpus"/ ;;
            *) cp tests/fuzz/seeds/"$t"/* "$corpus"/ ;;
            esac
            if ninja -C build-fuzz -j"$JOBS" "tests/fuzz/fuzz_$t" >/dev/null &&
                build-fuzz/tests/fuzz/fuzz_"$t" -max_total_time="$FUZZ_SECONDS" -timeout=30 -max_len=65536 \
                    -print_final_stats=1 -artifact_prefix=build-fuzz/crashes/"$t"- "$corpus" \
                    >build-fuzz/fuzz_"$t".log 2>&1; then
                echo "fuzz_$t: $(grep -o 'stat::number_of_executed_units: [0-9]*' build-fuzz/fuzz_"$t".log | grep -o '[0-9]*$') executions, no crash" >&2
                echo "1 0 0" >>"$COUNTS"
            else
                echo "fuzz_$t: FAILED (see build-fuzz/fuzz_$t.log, build-fuzz/crashes/)" >&2
                tail -30 build-fuzz/fuzz_"$t".log >&2
                echo "0 1 0" >>"$COUNTS"
            fi
        done
        ;;
    soak)
        stage "soak suite for ${SOAK_SECONDS}s under ASan"
        [ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined \
            -Db_lundef=false -Dbuildtype=debugoptimized -Dbench=false >/dev/null
        if ninja -C build-asan -j"$JOBS" tests/test_soak; then
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
awk '{p+=$1; f+=$2; s+=$3} END {printf "%d passed, %d failed, %d skipped\n", p, f, s; exit (f > 0)}' "$COUNTS"
