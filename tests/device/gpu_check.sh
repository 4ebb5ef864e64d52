#!/usr/bin/env bash
# The GPU check of issue 25: builds the device tests from this tree and runs
# them against the real CUDA runtime and GPU, then a small benchmark (GB/s
# into device memory beside a host_buffer read, printed, never judged).
# Not run in CI (no GPU there). On the device machine, from the repository root:
#
#   bash tests/device/gpu_check.sh            # build in build-gpu/, ~3-6 min on 16 cores
#   BUILD=build bash tests/device/gpu_check.sh  # reuse a carried build directory
#
# Exit 0 only when every step passed and the CUDA tests really ran (a skip,
# exit 77, means no runtime or no GPU was found and counts as a failure here).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
[ -x .venv/bin/meson ] && PATH=$PWD/.venv/bin:$PATH
failed=()
step() {  # step NAME COMMAND...: runs it, records a failure
    local name=$1
    shift
    echo "=== $name: $*"
    "$@"
    local rc=$?
    echo "=== $name: exit $rc"
    [ "$rc" -eq 0 ] || failed+=("$name (exit $rc)")
    return "$rc"
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
ls /usr/local/cuda*/lib*/libcudart.so* /usr/lib/x86_64-linux-gnu/libcudart.so* 2>/dev/null
python3 -c 'import ctypes.util; print("ctypes finds", ctypes.util.find_library("cudart"))' 2>/dev/null

if [ ! -f "$BUILD/build.ninja" ]; then
    step setup meson setup "$BUILD" -Dbuildtype=release -Dbench=false || exit 1
fi
step build ninja -C "$BUILD" tests/device/test_device tests/device/test_device_cuda || exit 1

# The real CUDA path: every dtype, a tensor 32 staging buffers long, host and
# pinned destinations read directly, a bad device index.
step cuda "$BUILD/tests/device/test_device_cuda" '~[bench]'
# The same pipeline through the host stand-in, and the missing-runtime error.
step stand_in "$BUILD/tests/device/test_device" '~[no_cuda]'
RINGSAFE_CUDART=/nonexistent/libcudart.so.12 step no_cuda "$BUILD/tests/device/test_device" '[no_cuda]'
# 1 GiB from the page cache into device memory, staging 4/16/64 MiB x 4.
step bench "$BUILD/tests/device/test_device_cuda" '[bench]' -s -r compact

# Python, where the extension builds and torch sees the GPU.
ext=$(ninja -C "$BUILD" -t targets all 2>/dev/null | grep -o '^engine/python/ringsafe/_ringsafe[^:]*\.so' | head -1)
if [ -n "$ext" ] && ninja -C "$BUILD" "$ext" >/dev/null &&
    python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    PYTHONPATH=$BUILD/engine/python step python python3 -m pytest tests/python/test_device.py -q -p no:cacheprovider
else
    echo "=== python: skipped (no extension built or torch sees no GPU)"
fi

if [ ${#failed[@]} -eq 0 ]; then
    echo "GPU CHECK PASSED"
else
    echo "GPU CHECK FAILED: ${failed[*]}"
    exit 1
fi
