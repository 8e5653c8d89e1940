#!/usr/bin/env bash
# Reproduces bench/multihost.md: builds bench_multihost, starts the S3 server the tests use
# (Ceph RGW on 127.0.0.1, tests/remote/servers.sh), makes a bucket, and runs both parts
# (aggregate write throughput of 1, 2 and 4 processes; commit time against data size, locally
# and on S3). Extra arguments go to bench_multihost (e.g. --mib 1024 --runs 5).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh build remote
./scripts/python_env.sh remote  # boto3: makes the bucket
cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DJTREE_BUILD_TESTS=OFF >/dev/null
cmake --build build-bench --target bench_multihost >/dev/null
servers=$(mktemp -d /tmp/jtree-bench-multihost-XXXXXX)
trap './tests/remote/servers.sh stop "$servers"' EXIT
./tests/remote/servers.sh start "$servers" all >/dev/null
# shellcheck disable=SC1091
. "$servers/env"
export AWS_ENDPOINT_URL_S3=$JTREE_TEST_S3_ENDPOINT AWS_ACCESS_KEY_ID=$JTREE_TEST_S3_KEY \
  AWS_SECRET_ACCESS_KEY=$JTREE_TEST_S3_SECRET AWS_REGION=us-east-1
.venv/bin/python -c "import boto3; boto3.client('s3').create_bucket(Bucket='bench-multihost')"
./build-bench/bench/bench_multihost --s3 s3://bench-multihost "$@"
