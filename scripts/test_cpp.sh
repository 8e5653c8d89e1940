#!/usr/bin/env bash
# The C++ tests: build with warnings as errors, run the doctest suites and the CLI tests.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh build
jobs=$(nproc)
echo "== C++ build (warnings are errors) =================================================="
# JTREE_CUDA=AUTO: the CUDA copy engine is compiled wherever the toolkit is installed (no GPU
# needed to compile; test_device_cuda is then reported Skipped unless there is one).
cmake -S . -B build-test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJTREE_WERROR=ON \
  -DJTREE_CUDA=AUTO >/dev/null
if grep -q '^JTREE_CUDA_ENABLED:INTERNAL=ON' build-test/CMakeCache.txt; then
  echo "CUDA toolkit found: the CUDA copy engine is compiled (test_device_cuda needs a GPU)"
else
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
  echo "!!! CUDA toolkit NOT found: the CUDA code (lib/src/cuda/cuda_copy_engine.cc) is NOT"
  echo "!!! compiled in this run (install it in /usr/local/cuda or set CUDAToolkit_ROOT)"
  echo "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
fi
cmake --build build-test -j "$jobs"
echo "== C++ unit tests ==================================================================="
# (test_remote_servers needs the real servers: scripts/test_remote.sh runs it.)
ctest --test-dir build-test --output-on-failure -j "$jobs" -LE servers 2>&1 | tee build-test/ctest.log
# A skipped test (exit 77: test_device_cuda without a GPU) is not a pass: say so loudly.
if grep -q '(Skipped)' build-test/ctest.log; then
  echo "!!!! SKIPPED, NOT PASSED (they need something this machine lacks):"
  grep '(Skipped)' build-test/ctest.log | sed 's/^/!!!!   /'
fi
echo "== the CLI against the demo's file =================================================="
./tests/cli/test_cli.sh build-test
