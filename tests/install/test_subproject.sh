#!/bin/sh
# Builds tests/consumer as a meson project holding ringsafe as a subproject
# (subprojects/ringsafe -> this source tree, -Duse_subproject=true): the
# subproject call, meson.override_dependency and dependency('ringsafe') must
# work, and the consumer must open and read a conformance file.
# usage: test_subproject.sh SOURCE_ROOT SOURCE_FILE.safetensors
set -eu
src=$1
input=$2
tmp=$(mktemp -d /tmp/ringsafe-subproject-XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "test_subproject: $*" >&2; exit 1; }

mkdir -p "$tmp/project/subprojects"
cp "$src/tests/consumer/meson.build" "$src/tests/consumer/meson_options.txt" "$src/tests/consumer/consumer.cpp" \
    "$tmp/project/"
ln -s "$(cd "$src" && pwd)" "$tmp/project/subprojects/ringsafe"
# plain (no -O, no -g) and a unity build of the subproject, 12 sources per file:
# ~51 s of CPU for the library instead of ~125 (non-unity) or ~71 (4 per file).
meson setup "$tmp/build" "$tmp/project" -Duse_subproject=true -Dringsafe:python=disabled --buildtype=plain -Dunity=subprojects -Dunity_size=12 \
    >"$tmp/setup.log" 2>&1 || { cat "$tmp/setup.log" >&2; fail "meson setup failed"; }
# meson 1.0 logs "Dependency ringsafe found: ...", newer ones "... for host machine found: ...".
grep -qE "Dependency ringsafe (for host machine )?found: YES .*\(overridden\)" "$tmp/setup.log" ||
    { cat "$tmp/setup.log" >&2; fail "dependency('ringsafe') was not the subproject's override (an installed .pc?)"; }
ninja -C "$tmp/build" consumer >"$tmp/build.log" 2>&1 || { tail -n 60 "$tmp/build.log" >&2; fail "build failed"; }
"$tmp/build/consumer" "$input" || fail "the consumer failed"
echo "test_subproject: ok"
