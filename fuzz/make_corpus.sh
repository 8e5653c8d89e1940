#!/usr/bin/env bash
# Regenerates the committed seed corpora under fuzz/corpus/ from valid files of every writer
# option (fuzz/make_corpus.cc) and the golden files. Run from anywhere; builds what it needs in
# build-test/ (the C++ test build).
#   fuzz/make_corpus.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-test --target fuzz_make_corpus
rm -rf fuzz/corpus
./build-test/fuzz/fuzz_make_corpus fuzz/corpus tests/golden
