#!/usr/bin/env bash
# Builds the GPU check's bundle: one folder (build-bundle/, at most 64 MiB with the
# tree) holding everything tests/device/gpu_check.sh runs on a bare, offline GPU
# machine (CUDA, PyTorch on CPython 3.12, but no liburing, Boost, Catch2 or OpenSSL):
#   bin/test_device, bin/test_device_cuda   liburing, Boost.JSON, OpenSSL, libstdc++ and libgcc
#                                           linked in: they need the C runtime alone
#   python/ringsafe/                        the package, its extension built for CPython 3.12
#   tests/python/                           test_device.py and conftest.py
#   bench/bench_gpu.py, run.sh              the GPU benchmark (+ its two modules); the runner (tests/device/gpu_check.sh)
#   wheels/                                 cp312 wheels: the reference safetensors, and the peers
#                                           fastsafetensors and runai-model-streamer
#   MANIFEST                                the commit and sources it was built from, what it needs
#
#   bash tools/device_bundle.sh [--rehearse]   (or bash tools/dev.sh bundle), then on the GPU
#   bash build-bundle/run.sh                   machine (tests/device/README.md: the tool's call)
# --rehearse: then run the bundle here as that machine would (below).
#
# Env: RINGSAFE_BUNDLE (the folder, default build-bundle), RINGSAFE_BUNDLE_BUILD (its meson
# build dir, default build-bundle-obj), RINGSAFE_BUNDLE_PYTHON (a CPython 3.12 with its headers;
# default /root/.pyenv/versions/3.12.1/bin/python3, else python3.12 on PATH),
# RINGSAFE_BUNDLE_PEERS=0 (no peers' wheels). The static libstdc++ and libgcc need glibc 2.36 on
# the GPU machine (arc4random, _dl_find_object); MANIFEST records it and the runner checks it.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
    "" | --rehearse) ;;
    *) sed -n '2,21p' "$0"; exit 2 ;;
esac

BUNDLE=${RINGSAFE_BUNDLE:-build-bundle}
OBJ=${RINGSAFE_BUNDLE_BUILD:-build-bundle-obj}
PY312=${RINGSAFE_BUNDLE_PYTHON:-}
LIMIT=$((64 << 20))  # what one device call carries, the tree included
[ -x .venv/bin/meson ] && PATH=$PWD/.venv/bin:$PATH
PIP_PY=python3  # pip download for the wheels
[ -x .venv/bin/python ] && PIP_PY=.venv/bin/python
die() { echo "device_bundle: $*" >&2; exit 1; }

if [ -z "$PY312" ]; then
    for p in /root/.pyenv/versions/3.12.1/bin/python3 "$(command -v python3.12 || true)"; do
        [ -n "$p" ] && [ -x "$p" ] && { PY312=$p; break; }
    done
fi
[ -n "$PY312" ] || die "no CPython 3.12 found: set RINGSAFE_BUNDLE_PYTHON (the GPU machine's python3 is 3.12)"
"$PY312" -c 'import sys, sysconfig, os
sys.exit(0 if sys.version_info[:2] == (3, 12) and os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)' ||
    die "$PY312 is not a CPython 3.12 with its headers"
command -v meson >/dev/null && command -v ninja >/dev/null || die "meson and ninja are needed (bash tools/dev.sh setup)"

# The meson build: static dependencies, the extension for PY312. pybind11 through its
# pkg-config file: its pybind11-config would add the include folder of the Python that
# runs it (.venv's) ahead of PY312's, and the extension would be built for that one.
pybind11_pc=$(python3 -c 'import pybind11, os; print(os.path.join(os.path.dirname(pybind11.__file__), "share", "pkgconfig"))' 2>/dev/null) ||
    die "pybind11 is needed (bash tools/dev.sh setup)"
export PKG_CONFIG_PATH=$pybind11_pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
link_args="['-static-libstdc++','-static-libgcc']"
if [ ! -f "$OBJ/build.ninja" ]; then
    mkdir -p "$OBJ"
    printf "[binaries]\npython = '%s'\n" "$PY312" >"$OBJ/native.ini"
    meson setup "$OBJ" --native-file "$OBJ/native.ini" -Dbuildtype=release -Dprefer_static=true \
        -Dpython=enabled -Dbench=false -Dfuzz=false "-Dcpp_link_args=$link_args"
else
    meson configure "$OBJ" "-Dcpp_link_args=$link_args"
fi
ext=$(ninja -C "$OBJ" -t targets all | sed -n 's|^\(engine/python/ringsafe/_ringsafe[^:]*\.so\):.*|\1|p' | head -1)
[ -n "$ext" ] || die "the build has no Python extension target"
ninja -C "$OBJ" tests/device/test_device tests/device/test_device_cuda "$ext"

# The extension must load in PY312 (it needs nothing else to be imported alone).
"$PY312" -c 'import importlib.util as u, sys
spec = u.spec_from_file_location("ringsafe._ringsafe", sys.argv[1])
spec.loader.exec_module(u.module_from_spec(spec))' "$OBJ/$ext" || die "$OBJ/$ext does not load in $PY312"

# What the binaries need at run time: the C runtime alone.
allowed='^(linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|ld-linux-x86-64\.so\.2|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libgcc_s\.so\.1)$'
for f in "$OBJ/tests/device/test_device" "$OBJ/tests/device/test_device_cuda" "$OBJ/$ext"; do
    extra=$(ldd "$f" | awk '{print $1}' | sed 's|.*/||' | grep -Ev "$allowed" || true)
    [ -z "$extra" ] || die "$f needs libraries the GPU machine may lack: $extra"
done

if [ -e "$BUNDLE" ] && [ ! -f "$BUNDLE/MANIFEST" ] && [ -n "$(ls -A "$BUNDLE")" ]; then
    die "$BUNDLE exists and is not a bundle (no MANIFEST): not replacing it"
fi
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/python/ringsafe" "$BUNDLE/tests/python" "$BUNDLE/bench" "$BUNDLE/wheels"
# Stripped of their symbol tables (about 30% of their size); the dynamic symbols stay.
strip --strip-unneeded -o "$BUNDLE/bin/test_device" "$OBJ/tests/device/test_device"
strip --strip-unneeded -o "$BUNDLE/bin/test_device_cuda" "$OBJ/tests/device/test_device_cuda"
strip --strip-unneeded -o "$BUNDLE/python/ringsafe/$(basename "$ext")" "$OBJ/$ext"
# The package as meson lays it out in the build tree (the .py files and py.typed).
find "$OBJ/engine/python/ringsafe" -maxdepth 1 -type f \( -name '*.py' -o -name py.typed \) \
    -exec cp {} "$BUNDLE/python/ringsafe/" \;
cp tests/python/test_device.py tests/python/conftest.py "$BUNDLE/tests/python/"
cp bench/bench_gpu.py bench/page_cache.py bench/safetensors_header.py "$BUNDLE/bench/"
cp tests/device/gpu_check.sh "$BUNDLE/run.sh"

# cp312 wheels: the reference at the version this tree tests against, the peers at their latest.
ref=$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("safetensors"))' 2>/dev/null || echo "")
wheels=("safetensors${ref:+==$ref}")
[ "${RINGSAFE_BUNDLE_PEERS:-1}" = 0 ] || wheels+=(fastsafetensors runai-model-streamer)
# pip matches platform tags exactly: every manylinux_2_N up to 2.35 (the binaries need 2.36).
platforms=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for n in $(seq 17 35); do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
rm -rf "$OBJ/wheels"  # one version of each: two would stop the install there
if "$PIP_PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$OBJ/wheels" "${wheels[@]}"; then
    cp "$OBJ"/wheels/*.whl "$BUNDLE/wheels/"
else
    echo "device_bundle: pip could not download ${wheels[*]}: the bundle carries no wheels" \
        "(the GPU machine's own safetensors is used; the peers' arms are left out)" >&2
fi

glibc_needed=$(for f in "$BUNDLE"/bin/* "$BUNDLE"/python/ringsafe/*.so; do objdump -T "$f"; done |
    grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit+uncommitted"
{
    echo "commit: $commit"
    echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -m), $(c++ --version | head -1)"
    echo "tree: $(bash tests/device/gpu_check.sh --tree-hash .)"
    echo "python: 3.12"
    echo "glibc_needed: $glibc_needed"
    echo "wheels: $(cd "$BUNDLE/wheels" && ls | tr '\n' ' ')"
    for f in "$BUNDLE"/bin/* "$BUNDLE"/python/ringsafe/*.so; do
        echo "needs ${f#"$BUNDLE"/}: $(ldd "$f" | awk '{print $1}' | sed 's|.*/||' | grep -v vdso | tr '\n' ' ')"
    done
} >"$BUNDLE/MANIFEST"
size=$(du -sb "$BUNDLE" | cut -f1)
tree=$(git ls-files -z -co --exclude-standard | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
echo "size: $size bytes ($((size >> 20)) MiB); with the tree ($((tree >> 20)) MiB): $(((size + tree) >> 20)) MiB of 64" \
    >>"$BUNDLE/MANIFEST"
cat "$BUNDLE/MANIFEST"
((size + tree <= LIMIT)) || die "$BUNDLE and the tree are $(((size + tree) >> 20)) MiB: over the 64 MiB a call carries"
echo "device_bundle: $BUNDLE is ready; on the GPU machine: bash $BUNDLE/run.sh (tests/device/README.md)"
[ "${1:-}" = --rehearse ] || exit 0

# --rehearse: the device tool's conditions, as far as this machine can play them: a copy of
# what a call carries (tracked and untracked-not-ignored files, and the bundle) in a new
# folder, run in a private mount namespace that hides liburing's, Boost's, OpenSSL's and
# Catch2's headers and shared libraries, by a clean CPython 3.12 venv holding only numpy and
# pytest (the GPU machine's python3 has them; torch is left out: its CUDA build is GBs).
sim=$(mktemp -d /tmp/device-rehearsal.XXXXXX)
git ls-files -z -co --exclude-standard | grep -zv '^\.venv$' | xargs -0 cp --parents -t "$sim" 2>/dev/null || true
cp -r "$BUNDLE" "$sim/build-bundle"
venv=$OBJ/rehearse-venv
if [ ! -x "$venv/bin/python" ]; then
    "$PY312" -m venv "$venv"
    "$venv/bin/python" -m pip install -q numpy pytest
fi
venv=$(cd "$venv" && pwd)
hide='set -e
for d in /usr/include/boost /usr/include/openssl /usr/include/catch2; do
    [ -d "$d" ] && mount -t tmpfs none "$d"
done
for f in /usr/include/liburing.h /usr/lib/x86_64-linux-gnu/liburing.so* /usr/lib/x86_64-linux-gnu/libboost_*.so* \
         /usr/lib/x86_64-linux-gnu/libssl.so* /usr/lib/x86_64-linux-gnu/libcrypto.so*; do
    [ -f "$f" ] && [ ! -L "$f" ] && mount --bind /dev/null "$f"
done
echo "rehearsal: hidden: $(ls /usr/include/boost | wc -l) files in /usr/include/boost," \
    "liburing.so.2 is $(stat -Lc %s /usr/lib/x86_64-linux-gnu/liburing.so.2 2>/dev/null || echo absent) bytes"
for f in "$1"/bin/* "$1"/python/ringsafe/*.so; do echo "ldd $f:"; ldd "$f"; done
set +e
PATH=/usr/bin:/bin PYTHON=$0 OUT=$PWD/out bash "$1/run.sh"'
echo "device_bundle: rehearsing in $sim ($(du -sh "$sim" | cut -f1) carried)"
if ! unshare -m --propagation private true 2>/dev/null; then
    echo "device_bundle: no private mount namespace here (needs root): nothing is hidden" >&2
    hide='PATH=/usr/bin:/bin PYTHON=$0 OUT=$PWD/out bash "$1/run.sh"'
    runner=(bash -c)
else
    runner=(unshare -m --propagation private bash -c)
fi
if (cd "$sim" && "${runner[@]}" "$hide" "$venv/bin/python" build-bundle); then
    echo "device_bundle: rehearsal passed; its result file: $sim/out/gpu_check.txt"
else
    die "rehearsal failed; its result file: $sim/out/gpu_check.txt"
fi
