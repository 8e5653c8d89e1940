#!/usr/bin/env bash
# The multi-process tests (many processes, one file): real OpenMPI jobs of 4 processes with
# mpi4py, a torch.distributed (gloo) job of 4, each saving one checkpoint together and reading it
# back on other topologies; a dead process, damaged segments, a commit killed midway; the same
# against a real S3 server (Ceph RGW, started here and stopped on exit), where the committing
# process must move only metadata. A skipped test fails (JTREE_TEST_REQUIRE_ALL=1).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
./scripts/install_deps.sh build python remote mpi
./scripts/python_env.sh multihost
echo "== pip install . (native module) ===================================================="
.venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps . \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

echo "== servers (S3) ====================================================================="
servers=$(mktemp -d /tmp/jtree-multihost-XXXXXX)
trap './tests/remote/servers.sh stop "$servers"' EXIT
./tests/remote/servers.sh start "$servers" all
# shellcheck disable=SC1091
. "$servers/env"

echo "== pytest tests/multihost ==========================================================="
export JTREE_TEST_REQUIRE_ALL=1
.venv/bin/python -m pytest -q -rs -p no:cacheprovider tests/multihost
echo "multi-process tests passed in $(( $(date +%s) - start )) s"
