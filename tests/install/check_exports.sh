#!/usr/bin/env bash
# Checks what a shared libjtree exports (ctest: install_exports; cmake/jtree.map says why):
#   check_exports.sh LIB [C_HEADER]
#  - its SONAME is libjtree.so.<ABI version> (given as $JTREE_EXPECT_SONAME, default libjtree.so.0);
#  - every exported symbol (nm -D --defined-only) is in namespace jtree (functions, and the
#    vtables, typeinfo and thunks of its classes) or a C function named jtree_*: anything else
#    (zstd, xxhash, curl, flatbuffers, std:: instantiations, internal helpers) fails;
#  - the public API is there: a few C++ functions always, and every function that C_HEADER
#    (<jtree/c.h>) declares, when given and present.
# Prints what is wrong and exits 1; exits 0 when the list is right.
set -euo pipefail
lib=$1
header=${2:-}
want_soname=${JTREE_EXPECT_SONAME:-libjtree.so.0}
fail=0

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "$want_soname" ]; then
  echo "SONAME is '$soname', expected '$want_soname'"
  fail=1
fi

# Mangled and demangled side by side (c++filt keeps the order: one line in, one line out).
mangled=$(nm -D --defined-only "$lib" | awk '{print $3}')
if [ -z "$mangled" ]; then
  echo "$lib exports nothing"
  exit 1
fi
demangled=$(printf '%s\n' "$mangled" | c++filt)
allowed='^(jtree::|typeinfo for jtree::|typeinfo name for jtree::|vtable for jtree::|VTT for jtree::|(non-)?virtual thunk to jtree::|jtree_[A-Za-z0-9_]*$)'
bad=$(printf '%s\n' "$demangled" | grep -Ev "$allowed" || true)
if [ -n "$bad" ]; then
  echo "exported but not public API ($(printf '%s\n' "$bad" | wc -l) symbols):"
  printf '%s\n' "$bad" | head -40 | sed 's/^/  /'
  fail=1
fi

# The public API must be exported, not only nothing else.
need=("jtree::save(jtree::Tree, std::basic_string_view<char, std::char_traits<char> >, jtree::WriteOptions const&)"
      "jtree::Reader::open(std::basic_string_view<char, std::char_traits<char> >, jtree::OpenOptions const&)"
      "jtree::version_string()"
      "jtree::Status::to_string[abi:cxx11]() const"
      "vtable for jtree::Source")
if [ -n "$header" ] && [ -f "$header" ]; then
  # Function names declared by the C header: identifiers jtree_* followed by "(".
  while read -r fn; do need+=("$fn"); done < <(
    sed 's://.*$::' "$header" | grep -oE '\bjtree_[A-Za-z0-9_]+[[:space:]]*\(' |
      sed 's/[[:space:](]//g' | sort -u)
fi
# (A here-string, not printf | grep -q: with pipefail, grep -q leaving at the first match makes
# printf die of SIGPIPE and the pipeline fail, now and then, for a symbol that is there.)
for sym in "${need[@]}"; do
  if ! grep -qxF -- "$sym" <<< "$demangled"; then
    echo "missing export: $sym"
    fail=1
  fi
done

n=$(printf '%s\n' "$mangled" | wc -l)
[ $fail -eq 0 ] && echo "ok: $lib ($soname) exports $n symbols, all public API"
exit $fail
