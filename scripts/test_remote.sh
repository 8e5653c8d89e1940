#!/usr/bin/env bash
# The remote tests: HTTP(S) range reads and S3, against real servers started here on
# 127.0.0.1 and stopped on exit (also on failure): nginx over HTTP and HTTPS (a throwaway CA),
# the fault-injecting proxy in front of it, and Ceph RGW as the S3 server.
#
#   scripts/test_remote.sh            install, build (build-remote/), start, test, stop
#   JTREE_REMOTE_SANITIZE=1 ...       also build with ASan+UBSan (build-remote-asan/) and run
#                                     the C++ remote tests under it
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
jobs=$(nproc)

./scripts/install_deps.sh build remote
./scripts/python_env.sh remote
# The Python package, for the Python-level remote tests (incremental in build-pip/).
.venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps . \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

echo "== build (warnings are errors) ======================================================"
# (shard_loader: examples/c, the C API against the servers; the other examples are not built.)
targets=(test_remote_units test_remote_servers jtree_remote_tool jtree_cli shard_loader)
cmake -S . -B build-remote -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DJTREE_WERROR=ON \
  -DJTREE_BUILD_BENCH=OFF -DJTREE_BUILD_EXAMPLES=ON >/dev/null
cmake --build build-remote -j "$jobs" --target "${targets[@]}"
if [ "${JTREE_REMOTE_SANITIZE:-0}" = 1 ]; then
  cmake -S . -B build-remote-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DJTREE_WERROR=ON \
    -DJTREE_SANITIZE="address;undefined" -DJTREE_BUILD_BENCH=OFF -DJTREE_BUILD_EXAMPLES=OFF \
    >/dev/null
  cmake --build build-remote-asan -j "$jobs" --target test_remote_units test_remote_servers
fi

echo "== servers =========================================================================="
servers=$(mktemp -d /tmp/jtree-remote-XXXXXX)
trap './tests/remote/servers.sh stop "$servers"' EXIT
./tests/remote/servers.sh start "$servers" all
# shellcheck disable=SC1091
. "$servers/env"

export JTREE_TEST_REQUIRE_ALL=1  # a server test that cannot reach its server fails
echo "== C++ remote tests ================================================================="
ctest --test-dir build-remote -L remote --output-on-failure
if [ "${JTREE_REMOTE_SANITIZE:-0}" = 1 ]; then
  echo "== C++ remote tests under ASan+UBSan ================================================"
  ctest --test-dir build-remote-asan -L remote --output-on-failure
fi

echo "== Python package, boto3 / botocore cross-checks, the CLI and the C example ======================"
JTREE_REMOTE_TOOL=$PWD/build-remote/tests/remote/jtree_remote_tool \
JTREE_CLI=$PWD/build-remote/tools/jtree/jtree \
JTREE_SHARD_LOADER=$PWD/build-remote/examples/shard_loader \
  .venv/bin/python -m pytest -q -p no:cacheprovider tests/remote

echo "remote tests passed in $(( $(date +%s) - start )) s"
