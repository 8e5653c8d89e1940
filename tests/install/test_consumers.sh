#!/usr/bin/env bash
# The out-of-tree consumer test (issues 18 and 49):
#   tests/install/test_consumers.sh BUILD_DIR PYTHON
# BUILD_DIR: a configured and built jtree build (jtree, jtree_shared, jtree_cli);
# PYTHON: an interpreter with the jtree package installed (scripts/test_wheel.sh passes the
# fresh venv that holds the wheel).
#  1. cmake --install BUILD_DIR into a temporary prefix; the expected files are there; jtree.pc
#     carries an rpath to it, and none when installed to /usr (DESTDIR);
#  2. PYTHON writes a .jtree file and the raw bytes of its arrays (write_fixture.py);
#  3. tests/install/consumer/ is configured out of tree with find_package(jtree CONFIG
#     COMPONENTS static) and built: C++ against jtree::jtree (libjtree.so) and
#     jtree::jtree_static (libjtree.a), C against jtree::jtree when <jtree/c.h> is installed;
#     then installed (CMAKE_INSTALL_RPATH_USE_LINK_PATH), its installed programs run too;
#  4. as on a machine without the -dev packages of zstd, xxHash, curl, OpenSSL and CUDA (their
#     prefixes hidden from find_package, JTREE_CONSUMER_HIDE_DEPS): the consumer of jtree::jtree
#     configures and builds, and the component `static` fails naming what it lacks;
#  5. the same sources are built with pkg-config (jtree.pc) alone, no other .pc file visible, by
#     the README's line with no rpath of its own: C and C++ against libjtree.so, C against
#     libjtree.a (pkg-config --static);
#  6. every program reads params/w and params/tok from the Python-written file; its output must
#     equal the bytes NumPy had, and the shared ones must load libjtree.so.0 from the prefix,
#     found through their own RUNPATH (LD_LIBRARY_PATH is unset for the whole test);
#  7. examples/save_and_load.cc, built against libjtree.so, saves and reads back a tree;
#  8. the installed jtree CLI lists the file.
# Exits non-zero on the first failure; cleans up its temporary directory.
set -euo pipefail
build=$(cd "$1" && pwd)
python=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/jtree-consumers.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
# Programs must find libjtree.so.0 by what they carry, as a user's do.
unset LD_LIBRARY_PATH

echo "-- cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(cd "$prefix" && ls -d lib*/libjtree.so.0 | xargs dirname)
for f in include/jtree/jtree.h include/jtree/export.h "$libdir/libjtree.so.0" "$libdir/libjtree.a" \
         bin/jtree "$libdir/cmake/jtree/jtreeConfig.cmake" "$libdir/pkgconfig/jtree.pc"; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
with_c=OFF
[ -f "$prefix/include/jtree/c.h" ] && with_c=ON
pc_libs=$(PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig pkg-config --libs jtree)
# (The path is relative to the .pc file's place: <prefix>/lib/pkgconfig/../../lib.)
pc_rpath=$(grep -o -- '-Wl,-rpath,[^ ]*' <<< "$pc_libs" | sed 's/^-Wl,-rpath,//') || true
if [ -z "$pc_rpath" ] || [ "$(readlink -f "$pc_rpath")" != "$(readlink -f "$prefix/$libdir")" ]; then
  echo "jtree.pc's Libs carry no rpath to $prefix/$libdir: $pc_libs"; exit 1
fi
# Into /usr (a distribution's package, DESTDIR): the loader searches /usr/lib, so no rpath.
DESTDIR=$work/destdir cmake --install "$build" --prefix /usr --component dev >/dev/null
sys_pc=$(ls "$work"/destdir/usr/lib*/pkgconfig/jtree.pc)
if ! grep -q '^Libs: ' "$sys_pc" || grep -q -- '-rpath' "$sys_pc"; then
  echo "jtree.pc installed to /usr carries an rpath (or no Libs):"; cat "$sys_pc"; exit 1
fi

echo "-- the file, written by the Python package ($python)"
"$python" "$here/write_fixture.py" "$work"

echo "-- find_package(jtree CONFIG COMPONENTS static) consumer (C: $with_c)"
consumer=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix"
          -DJTREE_CONSUMER_C=$with_c)
cmake -S "$here/consumer" -B "$work/cmake-build" "${consumer[@]}" \
  -DJTREE_CONSUMER_EXAMPLE="$here/../../examples/save_and_load.cc" >/dev/null
cmake --build "$work/cmake-build" >/dev/null
cmake --install "$work/cmake-build" --prefix "$work/app" >/dev/null
progs=("$work/cmake-build/read_leaf_cpp" "$work/cmake-build/read_leaf_cpp_static"
       "$work/app/bin/read_leaf_cpp")
shared=("$work/cmake-build/read_leaf_cpp" "$work/app/bin/read_leaf_cpp")
if [ $with_c = ON ]; then
  progs+=("$work/cmake-build/read_leaf_c" "$work/app/bin/read_leaf_c")
  shared+=("$work/cmake-build/read_leaf_c" "$work/app/bin/read_leaf_c")
fi

echo "-- the consumer of jtree::jtree without the dependencies' -dev packages"
cmake -S "$here/consumer" -B "$work/cmake-nodeps" "${consumer[@]}" \
  -DJTREE_CONSUMER_HIDE_DEPS=ON -DJTREE_CONSUMER_STATIC=OFF > "$work/nodeps.log" 2>&1 ||
  { cat "$work/nodeps.log"; echo "the consumer of jtree::jtree did not configure without"\
      "the dependencies' -dev packages"; exit 1; }
cmake --build "$work/cmake-nodeps" >/dev/null
progs+=("$work/cmake-nodeps/read_leaf_cpp")
shared+=("$work/cmake-nodeps/read_leaf_cpp")
if [ $with_c = ON ]; then
  progs+=("$work/cmake-nodeps/read_leaf_c")
  shared+=("$work/cmake-nodeps/read_leaf_c")
fi
# The same hidden prefixes with the component `static`: it must fail, naming a dependency.
if cmake -S "$here/consumer" -B "$work/cmake-nodeps-static" "${consumer[@]}" \
     -DJTREE_CONSUMER_HIDE_DEPS=ON -DJTREE_CONSUMER_STATIC=ON > "$work/nodeps.log" 2>&1; then
  echo "COMPONENTS static configured with its dependencies hidden"; exit 1
fi
if ! grep -q "zstd" "$work/nodeps.log"; then
  cat "$work/nodeps.log"; echo "COMPONENTS static failed without naming zstd"; exit 1
fi

echo "-- pkg-config consumer"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
# No other .pc file is visible (an empty PKG_CONFIG_LIBDIR replaces the system's directories):
# jtree.pc must need none of its dependencies' -dev packages, for --static neither.
mkdir "$work/no-pc"
export PKG_CONFIG_LIBDIR=$work/no-pc
for flags in "--cflags --libs" "--static --libs"; do
  # shellcheck disable=SC2086
  pkg-config $flags jtree >/dev/null ||
    { echo "pkg-config $flags jtree needs another .pc file (above)"; exit 1; }
done
# README's lines: nothing but what jtree.pc gives (its rpath included).
# shellcheck disable=SC2046
c++ -std=c++20 -O1 $(pkg-config --cflags jtree) "$here/consumer/read_leaf.cc" \
  -o "$work/pc_read_leaf_cpp" $(pkg-config --libs jtree)
progs+=("$work/pc_read_leaf_cpp")
shared+=("$work/pc_read_leaf_cpp")
if [ $with_c = ON ]; then
  # shellcheck disable=SC2046
  cc -std=c11 -O1 $(pkg-config --cflags jtree) "$here/consumer/read_leaf.c" \
    -o "$work/pc_read_leaf_c" $(pkg-config --libs jtree)
  progs+=("$work/pc_read_leaf_c")
  shared+=("$work/pc_read_leaf_c")
  # libjtree.a through pkg-config --static (-Bstatic: the linker would take the .so first).
  static_libs=$(pkg-config --static --libs jtree | sed 's/-ljtree/-Wl,-Bstatic -ljtree -Wl,-Bdynamic/')
  # shellcheck disable=SC2046,SC2086
  cc -std=c11 -O1 $(pkg-config --cflags jtree) "$here/consumer/read_leaf.c" \
    -o "$work/pc_read_leaf_c_static" $static_libs
  if grep -q libjtree <<< "$(ldd "$work/pc_read_leaf_c_static")"; then
    echo "pc_read_leaf_c_static loads libjtree.so: the static link did not take libjtree.a"
    exit 1
  fi
  progs+=("$work/pc_read_leaf_c_static")
fi

echo "-- each program against the Python-written file"
for p in "${shared[@]}"; do
  lib=$(ldd "$p" | awk '$1 == "libjtree.so.0" {print ($3 == "not") ? "nowhere (not found)" : $3}')
  if [ "$(readlink -f "$lib")" != "$(readlink -f "$prefix/$libdir/libjtree.so.0")" ]; then
    echo "${p#"$work"/} loads libjtree.so.0 from $lib, not from $prefix/$libdir"
    exit 1
  fi
done
for p in "${progs[@]}"; do
  for leaf in w tok; do
    "$p" "$work/py.jtree" "params/$leaf" "$work/out.bin" >/dev/null
    if ! cmp "$work/out.bin" "$work/$leaf.bin"; then
      echo "$(basename "$p"): params/$leaf differs from the bytes the Python package saved"
      exit 1
    fi
  done
  echo "   ok: ${p#"$work"/}"
done

echo "-- examples/save_and_load.cc against libjtree.so (the C++ write path)"
# (Outputs captured first: `cmd | grep -q` under pipefail fails when grep leaves early.)
out=$("$work/cmake-build/save_and_load" "$work/example.jtree") ||
  { echo "save_and_load against the installed library failed"; exit 1; }
grep -q "step = 1000" <<< "$out" ||
  { echo "save_and_load against the installed library printed no step = 1000"; exit 1; }

echo "-- the installed CLI"
out=$("$prefix/bin/jtree" ls "$work/py.jtree") || { echo "jtree ls failed"; exit 1; }
grep -q "params/w" <<< "$out" || { echo "jtree ls does not list params/w"; exit 1; }
echo "consumers ok: ${#progs[@]} programs (find_package and pkg-config) read the file byte-exact"
