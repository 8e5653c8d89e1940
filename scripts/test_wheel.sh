#!/usr/bin/env bash
# The Python wheel and the installed C/C++ library, as a user gets them (issue 18):
#  1. scripts/build_wheel.sh builds the repaired binary wheel; the source tree must show no new
#     file afterwards (git status --porcelain --ignored: untracked and ignored entries);
#  2. a fresh venv (no build tree on any path) installs it with the [ml] extra, timed;
#     tests/install/wheel_smoke.py runs there from a scratch directory: save, load, lazy slice,
#     bfloat16; the `jtree` command the wheel installs lists and verifies the file;
#  3. ldd: the module and the CLI need nothing outside the wheel but the manylinux base
#     libraries (libc, libm, libstdc++, libgcc_s, ...): no -dev package, no build tree;
#  4. tests/install/test_consumers.sh: cmake --install of build-test (scripts/test_cpp.sh's
#     build; configured and built here if absent; JTREE_TEST_BUILD_DIR=DIR names another) into
#     a temporary prefix, C and C++ programs built out of tree with find_package and with
#     pkg-config, run against a file the wheel's Python package wrote, their bytes compared.
# Prints the wheel's size, its install time and what ldd shows for the module.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
start=$(date +%s)
./scripts/install_deps.sh build python
# The project venv with the build tools (made before the snapshot below: it is no build output).
./scripts/python_env.sh wheel
work=$(mktemp -d "${TMPDIR:-/tmp}/jtree-test-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== build the wheel (scripts/build_wheel.sh) ========================================"
new_files() { git status --porcelain --ignored | grep -E '^(\?\?|!!) ' | sort || true; }
before=$(new_files)
wheel=$(./scripts/build_wheel.sh "$work/dist" | tail -1)
after=$(new_files)
if [ "$before" != "$after" ]; then
  echo "building the wheel wrote into the source tree:"
  diff <(echo "$before") <(echo "$after") || true
  exit 1
fi
echo "wheel: $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"

echo "== a fresh venv installs it ========================================================"
# The interpreter the wheel was built for (the project venv's base Python).
base_python=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
"$base_python" -m venv "$work/venv"
vpy=$work/venv/bin/python
pip=("$vpy" -m pip install -q --disable-pip-version-check)
# The dependencies first (from PyPI or pip's cache), so that the timed step is the wheel itself.
"${pip[@]}" numpy ml_dtypes 2> >(grep -v "is ignored: it is neither" >&2)
t0=$(date +%s.%N)
"${pip[@]}" "$wheel[ml]" 2> >(grep -v "is ignored: it is neither" >&2)
t1=$(date +%s.%N)
echo "installed in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}') s"

echo "== smoke test in the fresh venv ===================================================="
mkdir "$work/scratch"
(cd "$work/scratch" &&
   env -u PYTHONPATH "$vpy" - "$work/scratch" < "$repo/tests/install/wheel_smoke.py")
jt=$work/venv/bin/jtree
# (The output captured first: `cmd | grep -q` under pipefail fails when grep leaves early.)
listing=$(cd "$work/scratch" && "$jt" ls smoke.jtree) ||
  { echo "the wheel's jtree ls failed"; exit 1; }
grep -q "params/emb" <<< "$listing" ||
  { echo "the wheel's jtree command does not list params/emb"; exit 1; }
(cd "$work/scratch" && "$jt" verify smoke.jtree >/dev/null) ||
  { echo "the wheel's jtree verify failed"; exit 1; }
echo "jtree command ok: $("$jt" --version 2>&1 | head -1)"

echo "== ldd: only the wheel's own libraries and the manylinux base ========================="
pkg=$("$vpy" -c 'import jtree, os; print(os.path.dirname(jtree.__file__))')
# (auditwheel's manylinux allow-list: what every glibc system has; everything else is bundled.)
base='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libnsl|libutil'
base+='|libz|libstdc\+\+|libgcc_s)\.so'
for elf in "$pkg"/_jtree*.so "$pkg/_bin/jtree"; do
  echo "$(basename "$elf"):"
  ldd "$elf" | sed 's/ (0x[0-9a-f]*)$//; s/^\s*/   /'
  bad=$(ldd "$elf" | awk '{print $1, $3}' | while read -r name where; do
    if [[ "$where" == "not" ]]; then echo "$name not found"
    elif [[ "$where" == "$work/venv/"* ]] || [[ "$(basename "$name")" =~ $base ]]; then :
    else echo "$name -> $where"; fi
  done)
  if [ -n "$bad" ]; then
    echo "$(basename "$elf") needs libraries outside the wheel:"; echo "$bad"; exit 1
  fi
done

echo "== the installed C/C++ library: consumers via find_package and pkg-config ==============="
build=${JTREE_TEST_BUILD_DIR:-build-test}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJTREE_WERROR=ON >/dev/null
fi
cmake --build "$build" -j "$(nproc)" --target jtree jtree_shared jtree_cli
./tests/install/test_consumers.sh "$build" "$vpy"
echo "wheel tests passed in $(( $(date +%s) - start )) s"
