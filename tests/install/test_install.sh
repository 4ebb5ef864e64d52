#!/bin/sh
# Installs the build into a temporary DESTDIR (meson install --destdir), then
# builds a tiny consumer against the installed ringsafe.pc with pkg-config
# (shared and static, and a meson project using dependency('ringsafe')), runs it
# on a conformance file, and runs the installed CLI.
# usage: test_install.sh BUILD_DIR SOURCE_FILE.safetensors CONSUMER_DIR (tests/consumer)
set -eu
build=$1
input=$2
consumer=$3
tmp=$(mktemp -d /tmp/ringsafe-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "test_install: $*" >&2; exit 1; }

meson install -C "$build" --destdir "$tmp/dest" --no-rebuild >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "meson install failed"; }
pc=$(find "$tmp/dest" -name ringsafe.pc | head -n 1)
[ -n "$pc" ] || fail "no ringsafe.pc installed"
for f in ringsafe/reader.hpp ringsafe/writer.hpp ringsafe/asio.hpp; do
    find "$tmp/dest" -path "*/include/$f" | grep -q . || fail "header $f not installed"
done
find "$tmp/dest" -name 'libringsafe.so*' | grep -q . || fail "shared library not installed"
find "$tmp/dest" -name 'libringsafe.a' | grep -q . || fail "static library not installed"
cli=$(find "$tmp/dest" -path '*/bin/ringsafe' | head -n 1)
[ -n "$cli" ] || fail "CLI not installed"

# The .pc names the configured prefix; point it at where DESTDIR put it.
export PKG_CONFIG_PATH="$(dirname "$pc")"
orig=$(pkg-config --variable=prefix ringsafe) || fail "pkg-config cannot read $pc"
pc_() { pkg-config --define-variable=prefix="$tmp/dest$orig" "$@" ringsafe; }
cflags=$(pc_ --cflags) || fail "pkg-config --cflags failed"
libs=$(pc_ --libs) || fail "pkg-config --libs failed"
slibs=$(pc_ --static --libs) || fail "pkg-config --static --libs failed"
libdir=$(pc_ --variable=libdir)
case "$cflags" in *"$tmp/dest"*) ;; *) fail "cflags do not point into the install: $cflags" ;; esac

c++ -std=c++20 $cflags "$consumer/consumer.cpp" -o "$tmp/consumer_shared" $libs 2>"$tmp/cc.log" ||
    { cat "$tmp/cc.log" >&2; fail "building against the shared library failed"; }
LD_LIBRARY_PATH="$libdir" "$tmp/consumer_shared" "$input" || fail "the shared consumer failed"
c++ -std=c++20 $cflags "$consumer/consumer.cpp" -o "$tmp/consumer_static" -Wl,-Bstatic -lringsafe -Wl,-Bdynamic \
    $(echo "$slibs" | sed 's/-lringsafe//') 2>"$tmp/cc.log" ||
    { cat "$tmp/cc.log" >&2; fail "building against the static library failed"; }
"$tmp/consumer_static" "$input" || fail "the static consumer failed"
# meson: dependency('ringsafe') finds the .pc; the sysroot maps its paths into DESTDIR.
PKG_CONFIG_SYSROOT_DIR="$tmp/dest" meson setup "$tmp/meson-consumer" "$consumer" >"$tmp/meson.log" 2>&1 &&
    ninja -C "$tmp/meson-consumer" >>"$tmp/meson.log" 2>&1 ||
    { cat "$tmp/meson.log" >&2; fail "the meson consumer (dependency('ringsafe') via pkg-config) failed to build"; }
LD_LIBRARY_PATH="$libdir" "$tmp/meson-consumer/consumer" "$input" || fail "the meson consumer failed"
LD_LIBRARY_PATH="$libdir" "$cli" ls "$input" >/dev/null || fail "the installed CLI failed"

# The Python package, where it was built: the installed ringsafe-safetensors.pth makes
# RINGSAFE_AS_SAFETENSORS=1 switch `import safetensors` to ringsafe at start-up (site
# processes the .pth files of a site directory, as it does for site-packages).
pth=$(find "$tmp/dest" -name ringsafe-safetensors.pth | head -n 1)
if [ -n "$pth" ] && command -v python3 >/dev/null && python3 -c 'import torch, safetensors' 2>/dev/null; then
    site=$(dirname "$pth")
    [ -d "$site/ringsafe" ] || fail "the .pth is not beside the ringsafe package ($site)"
    check='import site, sys; site.addsitedir(sys.argv[1]); import safetensors.torch as t; print(t.load_file.__module__)'
    got=$(env -u PYTHONPATH RINGSAFE_AS_SAFETENSORS=1 LD_LIBRARY_PATH="$libdir" python3 -c "$check" "$site") ||
        fail "python with RINGSAFE_AS_SAFETENSORS=1 failed"
    [ "$got" = ringsafe.torch ] || fail "RINGSAFE_AS_SAFETENSORS=1 did not switch safetensors.torch (got $got)"
    got=$(env -u PYTHONPATH -u RINGSAFE_AS_SAFETENSORS LD_LIBRARY_PATH="$libdir" python3 -c "$check" "$site") ||
        fail "python without RINGSAFE_AS_SAFETENSORS failed"
    [ "$got" = safetensors.torch ] || fail "without RINGSAFE_AS_SAFETENSORS safetensors.torch is $got"
fi
echo "test_install: ok ($pc)"
