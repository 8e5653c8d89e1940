#!/usr/bin/env bash
# The Python wheels and the installed C/C++ library, as a user gets them (issues 18 and 49):
#  1. scripts/build_wheel.sh builds the repaired binary wheels, one per CPython 3.9, 3.10 and
#     3.11 and one stable-ABI wheel (cp312-abi3) for 3.12 and later, from one CMake build; the
#     source tree must show no new file afterwards (git status --porcelain --ignored: untracked
#     and ignored entries);
#  2. for each CPython 3.9 to 3.13, a fresh venv (no build tree on any path) installs the
#     package as pip does from PyPI, but from the directory of those wheels alone
#     (`pip install --no-index --find-links DIR --only-binary :all: "jtree-arrays[ml]"`, timed;
#     numpy and ml_dtypes from PyPI or pip's cache first): pip must pick the wheel of that
#     interpreter's version, the cp312-abi3 one for 3.12 and 3.13, and build nothing;
#     tests/install/wheel_smoke.py runs there from a scratch directory: save, load, lazy slice,
#     bfloat16; the `jtree` command the wheel installs lists and verifies the file;
#  3. ldd, in each venv: the module and the CLI need nothing outside the wheel but the
#     manylinux base libraries (libc, libm, libstdc++, libgcc_s, ...): no -dev package, no
#     build tree;
#  4. tests/install/test_consumers.sh: cmake --install of build-test (scripts/test_cpp.sh's
#     build; configured and built here if absent; JTREE_TEST_BUILD_DIR=DIR names another) into
#     a temporary prefix, C and C++ programs built out of tree with find_package and with
#     pkg-config, run against a file the wheel's Python package (the last venv's) wrote, their
#     bytes compared.
# The interpreters: the newest pyenv CPython 3.9, 3.10, 3.11, 3.12 and 3.13 found under
# ${PYENV_ROOT:-~/.pyenv}/versions (each one must be there), or the paths in
# $JTREE_WHEEL_PYTHONS (space-separated). Prints the wheels' sizes and build time, and per
# interpreter the wheel pip chose, its install time and what ldd shows for the module.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
start=$(date +%s)
./scripts/install_deps.sh build python
work=$(mktemp -d "${TMPDIR:-/tmp}/jtree-test-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
quiet() { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; }

if [ -n "${JTREE_WHEEL_PYTHONS:-}" ]; then
  read -r -a pythons <<< "$JTREE_WHEEL_PYTHONS"
else
  pythons=()
  for minor in 9 10 11 12 13; do
    p=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3."$minor".*/bin/python3 2>/dev/null |
        sort -V | tail -1 || true)
    [ -n "$p" ] || { echo "test_wheel.sh: no CPython 3.$minor under pyenv (or set" \
                          "JTREE_WHEEL_PYTHONS)"; exit 1; }
    pythons+=("$p")
  done
fi

echo "== build the wheels (scripts/build_wheel.sh) ======================================="
new_files() { git status --porcelain --ignored | grep -E '^(\?\?|!!) ' | sort || true; }
before=$(new_files)
t0=$(date +%s)
built=$(./scripts/build_wheel.sh "$work/dist" "${pythons[@]}")
mapfile -t wheels <<< "$built"
t1=$(date +%s)
after=$(new_files)
if [ "$before" != "$after" ]; then
  echo "building the wheels wrote into the source tree:"
  diff <(echo "$before") <(echo "$after") || true
  exit 1
fi
[ -n "$built" ] || { echo "scripts/build_wheel.sh printed no wheel"; exit 1; }
for w in "${wheels[@]}"; do echo "wheel: $(basename "$w"), $(du -k "$w" | cut -f1) KiB"; done
echo "${#wheels[@]} wheels built and repaired in $((t1 - t0)) s"

# (auditwheel's manylinux allow-list: what every glibc system has; everything else is bundled.)
base='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libnsl|libutil'
base+='|libz|libstdc\+\+|libgcc_s)\.so'
summary=()
t_venvs=$(date +%s)
for python in "${pythons[@]}"; do
  ver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  minor=${ver#3.}
  venv=$work/venv-$ver
  vpy=$venv/bin/python
  echo "== CPython $ver: a fresh venv installs jtree-arrays from the wheels' directory ==========="
  "$python" -m venv "$venv"
  pip=("$vpy" -m pip install -q --disable-pip-version-check)
  # The dependencies first (from PyPI or pip's cache), so that the timed step is the wheel itself.
  "${pip[@]}" numpy ml_dtypes 2> >(quiet)
  t0=$(date +%s.%N)
  # As from PyPI, but with the wheels' directory as the only index, and no source build.
  "${pip[@]}" --no-index --find-links "$work/dist" --only-binary :all: "jtree-arrays[ml]" \
    2> >(quiet)
  t1=$(date +%s.%N)
  took=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
  pkg=$(cd / && "$vpy" -c 'import jtree, os; print(os.path.dirname(jtree.__file__))')
  module=$(basename "$(ls "$pkg"/_jtree*.so)")
  if [ "$minor" -ge 12 ]; then want=_jtree.abi3.so; else want=_jtree.cpython-3$minor-*.so; fi
  # shellcheck disable=SC2053
  [[ "$module" == $want ]] ||
    { echo "CPython $ver installed $module, not $want"; exit 1; }
  chosen=$(cat "$pkg"/../jtree_arrays-*.dist-info/WHEEL | sed -n 's/^Tag: //p' | head -1)
  echo "installed the $chosen wheel ($module) in $took s"

  echo "-- smoke test"
  mkdir "$work/scratch-$ver"
  (cd "$work/scratch-$ver" &&
     env -u PYTHONPATH "$vpy" - "$work/scratch-$ver" < "$repo/tests/install/wheel_smoke.py")
  jt=$venv/bin/jtree
  # (The output captured first: `cmd | grep -q` under pipefail fails when grep leaves early.)
  listing=$(cd "$work/scratch-$ver" && "$jt" ls smoke.jtree) ||
    { echo "the wheel's jtree ls failed"; exit 1; }
  grep -q "params/emb" <<< "$listing" ||
    { echo "the wheel's jtree command does not list params/emb"; exit 1; }
  (cd "$work/scratch-$ver" && "$jt" verify smoke.jtree >/dev/null) ||
    { echo "the wheel's jtree verify failed"; exit 1; }
  echo "jtree command ok: $("$jt" --version 2>&1 | head -1)"

  echo "-- ldd: only the wheel's own libraries and the manylinux base"
  for elf in "$pkg"/_jtree*.so "$pkg/_bin/jtree"; do
    echo "$(basename "$elf"):"
    ldd "$elf" | sed 's/ (0x[0-9a-f]*)$//; s/^\s*/   /'
    bad=$(ldd "$elf" | awk '{print $1, $3}' | while read -r name where; do
      if [[ "$where" == "not" ]]; then echo "$name not found"
      elif [[ "$where" == "$venv/"* ]] || [[ "$(basename "$name")" =~ $base ]]; then :
      else echo "$name -> $where"; fi
    done)
    if [ -n "$bad" ]; then
      echo "$(basename "$elf") needs libraries outside the wheel:"; echo "$bad"; exit 1
    fi
  done
  summary+=("CPython $ver: $chosen, installed in $took s, smoke test passed")
done
echo "== the wheels per interpreter ======================================================"
printf '%s\n' "${summary[@]}"
echo "${#pythons[@]} interpreters: venvs made, installed and smoke-tested in" \
     "$(( $(date +%s) - t_venvs )) s"

echo "== the installed C/C++ library: consumers via find_package and pkg-config ==============="
build=${JTREE_TEST_BUILD_DIR:-build-test}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJTREE_WERROR=ON >/dev/null
fi
cmake --build "$build" -j "$(nproc)" --target jtree jtree_shared jtree_cli
./tests/install/test_consumers.sh "$build" "$vpy"
echo "wheel tests passed in $(( $(date +%s) - start )) s"
