"""Writers on S3 (Ceph RGW) from Python and the CLI (issue 19): foreign objects are never
replaced, incomplete multipart uploads of killed writers are aborted (by the next save, and by
`jtree clean s3://...`), a partial_write raced by another writer is refused, and a remote verify
costs about as many requests as a full load.

Run by scripts/test_remote.sh (JTREE_CLI: the jtree command; JTREE_TEST_*: the servers)."""
import json
import os
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

jtree = pytest.importorskip("jtree")
from jtree import _api  # noqa: E402

ENDPOINT = os.environ.get("JTREE_TEST_S3_ENDPOINT")
CLI = os.environ.get("JTREE_CLI")
needs_s3 = pytest.mark.skipif(not ENDPOINT, reason="no S3 server (scripts/test_remote.sh)")


@pytest.fixture
def s3(monkeypatch):
    """(boto3 client, a new bucket), with jtree configured through the environment."""
    boto3 = pytest.importorskip("boto3")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", ENDPOINT or "")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", os.environ.get("JTREE_TEST_S3_KEY", "testkey"))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY",
                       os.environ.get("JTREE_TEST_S3_SECRET", "testsecret"))
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    client = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1")
    name = f"jtree-w-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=name)
    return client, name


def leave_upload(client, bucket, key):
    """A killed writer: an upload with one part stored, never completed nor aborted."""
    up = client.create_multipart_upload(Bucket=bucket, Key=key)
    client.upload_part(Bucket=bucket, Key=key, UploadId=up["UploadId"], PartNumber=1,
                       Body=b"x" * 1000)


def pending(client, bucket, prefix):
    got = client.list_multipart_uploads(Bucket=bucket, Prefix=prefix)
    return sorted(u["Key"] for u in got.get("Uploads", []))


@needs_s3
def test_save_never_replaces_a_foreign_object(s3):
    client, bucket = s3
    client.put_object(Bucket=bucket, Key="notes.txt", Body=b"precious notes")
    url = f"s3://{bucket}/notes.txt"
    with pytest.raises(jtree.AlreadyExistsError) as e:
        jtree.save({"w": np.ones(10)}, url)
    assert url in str(e.value) and "not a jtree file" in str(e.value)
    assert client.get_object(Bucket=bucket, Key="notes.txt")["Body"].read() == b"precious notes"
    jtree.save({"w": np.ones(10)}, url, overwrite_foreign=True)
    np.testing.assert_array_equal(jtree.load(url)["w"], np.ones(10))


@needs_s3
def test_a_save_aborts_what_killed_writers_left_and_clean_does_it_by_hand(s3):
    client, bucket = s3
    key = "run/ckpt.jtree"
    leave_upload(client, bucket, key)
    leave_upload(client, bucket, key + ".seg-00002-of-00004")
    leave_upload(client, bucket, "run/ckpt.jtree.bak")  # another target: kept
    time.sleep(0.05)
    jtree.save({"w": np.arange(100)}, f"s3://{bucket}/{key}")
    assert pending(client, bucket, "run/") == ["run/ckpt.jtree.bak"]
    if not CLI:
        pytest.skip("JTREE_CLI not set (scripts/test_remote.sh sets it)")
    leave_upload(client, bucket, key)
    leave_upload(client, bucket, key + ".seg-00000-of-00002")
    out = subprocess.run([CLI, "clean", f"s3://{bucket}/{key}"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"s3://{bucket}/{key}: 2 incomplete multipart uploads aborted\n"
    assert pending(client, bucket, "run/") == ["run/ckpt.jtree.bak"]
    out = subprocess.run([CLI, "clean", "--json", f"s3://{bucket}/run/ckpt.jtree.bak"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["paths"][0]["removed"] == 1
    assert pending(client, bucket, "run/") == []


@needs_s3
def test_partial_write_raced_by_another_writer_is_refused(s3, monkeypatch):
    _, bucket = s3
    url = f"s3://{bucket}/inc.jtree"
    jtree.save({"w": np.ones(1000)}, url)
    real_merge = _api.merge

    def merge_then_race(root, base, where):
        merged = real_merge(root, base, where)
        code = ("import sys, numpy as np, jtree; jtree.save({'theirs': np.arange(7)}, "
                "sys.argv[1], partial_write=True)")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        subprocess.run([sys.executable, "-c", code, url], check=True, env=env)
        return merged

    monkeypatch.setattr(_api, "merge", merge_then_race)
    with pytest.raises(jtree.AbortedError) as e:
        jtree.save({"mine": np.zeros(5)}, url, partial_write=True)
    assert "changed since this append was planned" in str(e.value)
    monkeypatch.setattr(_api, "merge", real_merge)
    out = jtree.load(url)
    assert list(out) == ["w", "theirs"]
    assert jtree.open(url).info()["generation"] == 1


@needs_s3
def test_remote_verify_costs_about_a_full_load(s3):
    _, bucket = s3
    url = f"s3://{bucket}/many.jtree"
    data = np.random.default_rng(5).integers(0, 255, 500 * 4096, dtype=np.uint8)
    jtree.save({"w": data}, url, compression=None, chunk_bytes=4096)
    with jtree.open(url) as f:
        assert f.info()["num_chunks"] == 500
        opened = f.io_stats()["read_requests"]
        np.testing.assert_array_equal(f["w"][:], data)
        load = f.io_stats()["read_requests"] - opened
    with jtree.open(url) as f:
        opened = f.io_stats()["read_requests"]
        assert f.verify()["ok"]
        verify = f.io_stats()["read_requests"] - opened
    print(f"500 chunks over S3: full load {load} requests, verify {verify}")
    assert verify <= 2 * load + 2
