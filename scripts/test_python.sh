#!/usr/bin/env bash
# The Python tests: the project's venv with the test packages, the package installed into it from
# this checkout with pip (scikit-build-core builds the native module through the project's CMake;
# build-pip/ keeps the build between runs), then pytest with JAX on 8 CPU devices. A test whose
# package is missing fails here instead of skipping (JTREE_TEST_REQUIRE_ALL=1).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
./scripts/install_deps.sh build python
./scripts/python_env.sh test
echo "== pip install . (native module: nanobind + the jtree library) ============================"
# The build tools (scikit-build-core, nanobind) are the venv's: no isolated build environment.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps . \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
echo "== pytest tests/python =============================================================="
export XLA_FLAGS=--xla_force_host_platform_device_count=8
export JTREE_TEST_REQUIRE_ALL=1
.venv/bin/python -m pytest -q -rs -p no:cacheprovider tests/python
echo "python tests passed in $(( $(date +%s) - start )) s"
