#!/usr/bin/env bash
# The C++ tests: build with warnings as errors, run the doctest suites and the CLI tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh build
jobs=$(nproc)
echo "== C++ build (warnings are errors) =================================================="
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJTREE_WERROR=ON >/dev/null
cmake --build build-test -j "$jobs"
echo "== C++ unit tests ==================================================================="
# (test_remote_servers needs the real servers: scripts/test_remote.sh runs it.)
ctest --test-dir build-test --output-on-failure -j "$jobs" -LE servers
echo "== the CLI against the demo's file =================================================="
./tests/cli/test_cli.sh build-test
