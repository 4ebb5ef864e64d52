#!/usr/bin/env bash
# The GPU check (issues 25 and 34), run on a bare GPU machine: it builds nothing
# there. tools/device_bundle.sh builds, on a machine with the build tools, one
# folder (build-bundle/) holding the device tests linked with everything but the
# C runtime, the Python package for CPython 3.12, the Python device tests, the
# GPU benchmark, the peers' wheels, and this script as run.sh. On the GPU machine:
#
#   bash build-bundle/run.sh               # the bundle's copy of this script
#   bash tests/device/gpu_check.sh [BUNDLE]  # the same, bundle at BUNDLE (default build-bundle)
#
# Steps: the C++ stand-in pipeline and the missing-runtime error; the real CUDA
# tests (every dtype exact, a tensor many staging buffers long, host and pinned
# destinations, the stager, stream ordering: whatever test_device_cuda holds);
# their 1 GiB benchmark; the package imported by the machine's python3 with the
# reference safetensors and the peers installed from the carried wheels;
# tests/python/test_device.py; bench/bench_gpu.py. libcudart: the one torch
# loads, else the system CUDA's (printed; exported as RINGSAFE_CUDART).
# Everything printed also goes to $OUT/gpu_check.txt (OUT unset: a new temp folder).
# Exit 0 when no step failed. A CUDA step that is skipped (exit 77, "skipped:")
# fails the check when nvidia-smi lists a GPU (RINGSAFE_EXPECT_GPU=0/1 overrides).
# Env: PYTHON (default python3), RUNNER_BUDGET_S (default 210: the benchmark gets
# what is left of it, at most BENCH_BUDGET_S, default 120), BENCH_ARGS (extra
# arguments for bench_gpu.py).
#
#   bash tests/device/gpu_check.sh --tree-hash ROOT   # prints the hash of the sources the
#                                                     # bundle is built from (MANIFEST's tree)
set -u

# The hash of the files that make the bundle, as tools/device_bundle.sh records it.
tree_hash() {
    (cd "$1" && find engine include tests/device tests/support tests/meson.build meson.build meson_options.txt \
        tests/python/test_device.py tests/python/conftest.py bench/bench_gpu.py bench/page_cache.py \
        bench/safetensors_header.py \
        -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -print0 2>/dev/null |
        LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}
if [ "${1:-}" = --tree-hash ]; then
    tree_hash "${2:-.}"
    exit
fi

here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/MANIFEST" ]; then
    BUNDLE=$here
else
    BUNDLE=$(cd "${1:-$here/../../build-bundle}" 2>/dev/null && pwd) || {
        echo "gpu_check: no bundle at ${1:-$here/../../build-bundle}: build it with tools/device_bundle.sh" >&2
        exit 2
    }
fi
[ -f "$BUNDLE/MANIFEST" ] || { echo "gpu_check: $BUNDLE has no MANIFEST: not a bundle" >&2; exit 2; }
export OUT=${OUT:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
mkdir -p "$OUT"
LOG=$OUT/gpu_check.txt
if [ -z "${GPU_CHECK_LOGGED:-}" ]; then  # everything below also goes to $LOG
    GPU_CHECK_LOGGED=1 bash "$0" "$@" 2>&1 | tee "$LOG"
    exit "${PIPESTATUS[0]}"
fi
PY=${PYTHON:-python3}
BUDGET=${RUNNER_BUDGET_S:-210}  # the whole run, benchmark included, stays under this (seconds)
T0=$SECONDS
results=()
failed=0
manifest() { sed -n "s/^$1: //p" "$BUNDLE/MANIFEST" | head -1; }

gpu_expected=0
if [ -n "${RINGSAFE_EXPECT_GPU:-}" ]; then
    gpu_expected=$RINGSAFE_EXPECT_GPU
elif nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    gpu_expected=1
fi

# step NAME SECONDS COMMAND...: runs it under a time limit, records PASS, FAIL
# or SKIP (exit 77, or a line starting "skipped:"; a FAIL when a GPU is expected
# and the step needs one: NAME starts with cuda or gpu).
step() {
    local name=$1 limit=$2 rc t out
    shift 2
    echo
    echo "=== $name: $(printf '%s ' "$@" | tr '\n' ' ' | cut -c1-200) (limit ${limit}s)"
    t=$SECONDS
    out=$(mktemp)
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    local status=PASS
    if [ "$rc" -eq 77 ] || { [ "$rc" -eq 0 ] && grep -q '^skipped:' "$out"; }; then
        status=SKIP
        if [ "$gpu_expected" = 1 ] && [[ $name == cuda* || $name == gpu* ]]; then status="FAIL (skipped)"; fi
    elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        status="FAIL (time limit)"
    elif [ "$rc" -ne 0 ]; then
        status="FAIL (exit $rc)"
    fi
    rm -f "$out"
    [[ $status == FAIL* ]] && failed=1
    results+=("$(printf '%-14s %-20s %4ds' "$name" "$status" $((SECONDS - t)))")
    echo "=== $name: $status"
}

echo "=== ringsafe GPU check, $(date -u '+%Y-%m-%d %H:%M:%S UTC'), bundle $BUNDLE"
sed 's/^/  bundle: /' "$BUNDLE/MANIFEST" | grep -E 'bundle: (commit|built|tree|python|glibc_needed|size):'
root=$(cd "$BUNDLE/.." && pwd)
stale=""
if [ -d "$root/engine" ] && [ -d "$root/tests/device" ]; then
    now=$(tree_hash "$root")
    if [ "$now" != "$(manifest tree)" ]; then
        stale="the tree at $root (sources $now) is not the one the bundle was built from ($(manifest tree)): rebuild it"
        echo "WARNING: $stale"
    fi
fi
echo "machine: $(uname -m), kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 2^20}' /proc/meminfo)"
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
need=$(manifest glibc_needed)
echo "glibc $glibc (the bundle needs $need)"
if [ -n "$glibc" ] && [ -n "$need" ] && [ "$(printf '%s\n%s\n' "$need" "$glibc" | sort -V | head -1)" != "$need" ]; then
    echo "FAIL: this glibc is older than the bundle needs (its static libstdc++ and libgcc were built" \
        "against glibc $need): build the bundle on a machine with this glibc or an older one"
    failed=1
fi
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sed 's/^/GPU: /'
else
    echo "GPU: no nvidia-smi"
fi
echo "GPU expected: $([ "$gpu_expected" = 1 ] && echo yes || echo 'no (CUDA steps may skip)')"
echo "python: $(command -v "$PY") $("$PY" -c 'import sys; print(sys.version.split()[0])' 2>&1)"

# libcudart: the one torch loads (its wheel's nvidia/*/lib, or torch/lib), else the system CUDA's.
cudart=$("$PY" - <<'EOF' 2>/dev/null
import glob, os
try:
    import torch
except Exception:
    raise SystemExit(0)
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libcudart.so" in l.split()[-1]]
if maps:
    print(maps[0], "(loaded by torch", torch.__version__ + ")")
    raise SystemExit(0)
base = os.path.dirname(os.path.dirname(torch.__file__))
for pat in ("nvidia/*/lib/libcudart.so.*", "nvidia/cuda_runtime/lib/libcudart.so.*", "torch/lib/libcudart*.so*"):
    hits = sorted(glob.glob(os.path.join(base, pat)))
    if hits:
        print(hits[-1], "(in torch's wheel folders", torch.__version__ + ")")
        raise SystemExit(0)
EOF
)
if [ -z "$cudart" ]; then
    sys=$(ldconfig -p 2>/dev/null | awk '/libcudart\.so\.[0-9]+ / {print $NF; exit}')
    [ -z "$sys" ] && sys=$(ls /usr/local/cuda/lib64/libcudart.so.[0-9]* /usr/local/cuda*/lib*/libcudart.so.[0-9]* \
        2>/dev/null | head -1)
    [ -n "$sys" ] && cudart="$sys (the system CUDA)"
fi
if [ -n "$cudart" ]; then
    export RINGSAFE_CUDART=${cudart%% (*}
    echo "libcudart: $cudart; RINGSAFE_CUDART=$RINGSAFE_CUDART"
else
    echo "libcudart: none found (torch's wheel, ldconfig, /usr/local/cuda*): the CUDA steps will skip"
fi

bin=$BUNDLE/bin
step stand_in 60 "$bin/test_device" '~[no_cuda]'
RINGSAFE_CUDART=/nonexistent/libcudart.so.12 step no_cuda 30 "$bin/test_device" '[no_cuda]'
step cuda 120 "$bin/test_device_cuda" '~[bench]' --durations yes
step cuda_bench 90 "$bin/test_device_cuda" '[bench]'

# Python: the package from the bundle, the wheels into a folder of their own.
site=$(mktemp -d /tmp/gpu-check-site.XXXXXX)
if ls "$BUNDLE"/wheels/*.whl >/dev/null 2>&1; then
    echo
    echo "=== wheels: $(cd "$BUNDLE/wheels" && ls ./*.whl | sed 's|^\./||' | tr '\n' ' ')"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
        --target "$site" "$BUNDLE"/wheels/*.whl || echo "wheels: pip could not install them; the machine's own packages are used"
fi
export PYTHONPATH=$BUNDLE/python:$site${PYTHONPATH:+:$PYTHONPATH}
# Where a GPU is expected, torch must see it and ringsafe must load the runtime.
step python_import 60 "$PY" -c "
import sys
if '%d.%d' % sys.version_info[:2] != '$(manifest python)':
    sys.exit('$PY is Python %d.%d; the bundle holds the extension for $(manifest python): set PYTHON' % sys.version_info[:2])
import ringsafe, safetensors
from ringsafe import _ringsafe
cuda = _ringsafe.cuda_runtime_available()
print('python', sys.version.split()[0], '| ringsafe', ringsafe.__file__, '| extension', _ringsafe.__file__)
print('safetensors', safetensors.__version__, safetensors.__file__)
print('ringsafe loads the CUDA runtime:', cuda.available, cuda.reason)
try:
    import torch
    print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'devices', torch.cuda.device_count())
    gpu = torch.cuda.is_available()
except ImportError as e:
    print('torch: not importable:', e)
    gpu = False
if $gpu_expected and not (gpu and ok):
    sys.exit('a GPU is expected: torch must see it and ringsafe must load the CUDA runtime')
"
step python_tests 150 "$PY" -m pytest "$BUNDLE/tests/python/test_device.py" -q -rs -p no:cacheprovider
remaining=$((BUDGET - (SECONDS - T0)))
budget=${BENCH_BUDGET_S:-120}
((budget > remaining - 30)) && budget=$((remaining - 30))
if ((budget < 20)); then
    results+=("$(printf '%-14s %-20s' gpu_bench 'NOT RUN (no time)')")
    echo "=== gpu_bench: not run, ${remaining}s left of the runner's $BUDGET"
else
    # fastsafetensors dlopens "libcudart.so", a name torch's wheel does not ship: give it the
    # runtime found above under that name (the same file, so one runtime in the process).
    libdir=$site/lib
    mkdir -p "$libdir"
    [ -n "${RINGSAFE_CUDART:-}" ] && ln -sf "$RINGSAFE_CUDART" "$libdir/libcudart.so"
    # shellcheck disable=SC2086  # BENCH_ARGS: words
    step gpu_bench $((budget + 90)) env PYTHONUNBUFFERED=1 LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$PY" "$BUNDLE/bench/bench_gpu.py" --budget-s "$budget" ${BENCH_ARGS:-}
fi
rm -rf "$site"

echo
echo "=== summary ($((SECONDS - T0)) s; bundle commit $(manifest commit), built $(manifest built))"
printf '%s\n' "${results[@]}"
[ -n "$stale" ] && echo "WARNING: $stale"
if ((failed)); then
    echo "GPU CHECK FAILED"
elif [ "$gpu_expected" = 1 ]; then
    echo "GPU CHECK PASSED on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
else
    echo "GPU CHECK PASSED, CUDA STEPS SKIPPED (no GPU here)"
fi
echo "result file: $LOG"
exit "$failed"
