#!/usr/bin/env bash
# The demo: install what is missing, build, write a transformer-shaped checkpoint, list it,
# and read back one layer and a slice of the embedding.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DJTREE_BUILD_TESTS=OFF >/dev/null
cmake --build build --target jtree_cli jtree_demo
mkdir -p demo-out
echo
echo "== 1. save =========================================================================="
./build/examples/jtree_demo write demo-out/checkpoint.jtree
echo
echo "== 2. jtree ls ======================================================================="
./build/tools/jtree/jtree ls demo-out/checkpoint.jtree
echo
echo "== 3. partial loads =================================================================="
./build/examples/jtree_demo load demo-out/checkpoint.jtree
echo
echo "== 4. a slice from the command line =================================================="
./build/tools/jtree/jtree get demo-out/checkpoint.jtree 'params/embed[1000:1002, :6]'
./build/tools/jtree/jtree verify demo-out/checkpoint.jtree
