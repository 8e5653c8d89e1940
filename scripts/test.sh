#!/usr/bin/env bash
# The whole test suite: each part installs what it needs, builds, and runs its tests.
# CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
parts=(test_cpp test_python test_wheel test_remote test_multihost test_safety)
for part in "${parts[@]}"; do
  script=./scripts/$part.sh
  if [ ! -x "$script" ]; then
    echo "!! $script is missing: that part of the suite is NOT run"
    exit 1
  fi
  echo
  echo "######## $part ########"
  "$script"
done
echo
echo "all tests passed in $(( $(date +%s) - start )) s"
