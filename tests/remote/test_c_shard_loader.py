"""examples/c/shard_loader.c (the C API, as a server uses it) against real servers: one
tensor-parallel shard of every weight of a file the Python package wrote, over HTTP from nginx
and from S3 (Ceph RGW), reading about 1/WORLD_SIZE of the file.

Run by scripts/test_remote.sh, which starts the servers, builds the example and exports
JTREE_SHARD_LOADER (its path) and the servers' JTREE_TEST_* variables; without them every test
is skipped (a failure under JTREE_TEST_REQUIRE_ALL=1).
"""
import os
import re
import subprocess
import uuid

import numpy as np
import pytest

import jtree

LOADER = os.environ.get("JTREE_SHARD_LOADER")
HTTP = os.environ.get("JTREE_TEST_HTTP")
WWW = os.environ.get("JTREE_TEST_WWW")
ENDPOINT = os.environ.get("JTREE_TEST_S3_ENDPOINT")
WORLD = 4

needs_http = pytest.mark.skipif(not (LOADER and HTTP and WWW),
                                reason="no nginx or no shard_loader (scripts/test_remote.sh)")
needs_s3 = pytest.mark.skipif(not (LOADER and ENDPOINT),
                              reason="no S3 server or no shard_loader (scripts/test_remote.sh)")


def weights():
    """Four 2-D weights of 4 MiB (row-chunked) and a bias: a file of about 16 MiB."""
    rng = np.random.default_rng(5)
    return {f"layer{i}": {"w": rng.standard_normal((2048, 512)).astype(np.float32),
                          "b": rng.standard_normal((2048,)).astype(np.float32)}
            for i in range(4)}


def run_loader(url, rank, env=None):
    r = subprocess.run([LOADER, url, str(rank), str(WORLD), "row"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr
    loaded = re.search(r"(\d+) tensors, (\d+) bytes loaded", r.stdout)
    read = re.search(r"read (\d+) bytes in (\d+) requests from a file of (\d+) bytes", r.stdout)
    assert loaded and read, r.stdout
    return (int(loaded.group(1)), int(loaded.group(2)), int(read.group(1)), int(read.group(3)),
            r.stdout)


def check_shard(out, tree, rank):
    tensors, loaded, read, size, text = out
    rows = 2048 // WORLD
    assert tensors == 8
    assert loaded == 4 * (rows * 512 * 4 + rows * 4)  # a quarter of every weight and bias
    assert f"layer1/w: rows [{rank * rows}, {(rank + 1) * rows}) of [2048, 512]" in text
    # The shard's chunks plus the metadata, not the file: well under half of it.
    assert loaded <= read < size / 2, text


@needs_http
def test_shard_over_http():
    tree = weights()
    name = f"shards-{uuid.uuid4().hex[:8]}.jtree"
    path = os.path.join(WWW, name)
    jtree.save(tree, path, compression=None, chunk_bytes=256 << 10)
    try:
        for rank in (0, 3):
            check_shard(run_loader(f"{HTTP}/{name}", rank), tree, rank)
    finally:
        os.unlink(path)


@needs_s3
def test_shard_over_s3(tmp_path):
    boto3 = pytest.importorskip("boto3")
    env = {"AWS_ENDPOINT_URL_S3": ENDPOINT, "AWS_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": os.environ.get("JTREE_TEST_S3_KEY", "testkey"),
           "AWS_SECRET_ACCESS_KEY": os.environ.get("JTREE_TEST_S3_SECRET", "testsecret")}
    s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                      aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    bucket = f"jtree-c-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    local = tmp_path / "w.jtree"
    tree = weights()
    jtree.save(tree, str(local), compression=None, chunk_bytes=256 << 10)
    s3.upload_file(str(local), bucket, "w.jtree")
    check_shard(run_loader(f"s3://{bucket}/w.jtree", 2, env), tree, 2)
