"""The Python package over the real servers: jtree.save/load/open with https:// and s3:// URLs
behave as with local paths, and partial reads fetch only what they need (read statistics).

Run by scripts/test_remote.sh, which starts nginx (HTTP and HTTPS), the fault proxy and Ceph RGW
and exports JTREE_TEST_*; the jtree package must be installed in the interpreter running pytest.
"""
import os
import uuid

import numpy as np
import pytest

jtree = pytest.importorskip("jtree")

HTTP = os.environ.get("JTREE_TEST_HTTP")
HTTPS = os.environ.get("JTREE_TEST_HTTPS")
PROXY = os.environ.get("JTREE_TEST_PROXY")
WWW = os.environ.get("JTREE_TEST_WWW")
ENDPOINT = os.environ.get("JTREE_TEST_S3_ENDPOINT")
needs_http = pytest.mark.skipif(not HTTP, reason="no nginx (scripts/test_remote.sh)")
needs_s3 = pytest.mark.skipif(not ENDPOINT, reason="no S3 server (scripts/test_remote.sh)")
KiB, MiB = 1 << 10, 1 << 20


def checkpoint(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "params": {
            # 4 MiB, chunked by rows: a slice touches few chunks.
            "emb": rng.standard_normal((4096, 256)).astype(np.float32),
            "layers": [{"w": rng.standard_normal((256, 256)).astype(np.float32),
                        "b": np.zeros(256, np.float32)} for _ in range(3)],
        },
        "step": 1234,
        "name": "run-7",
    }


def assert_tree_equal(a, b):
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_tree_equal(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_tree_equal(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    else:
        assert a == b


@pytest.fixture
def served():
    """A checkpoint saved into nginx's web root: (tree, its file name)."""
    tree = checkpoint()
    name = f"py-{uuid.uuid4().hex[:8]}.jtree"
    jtree.save(tree, os.path.join(WWW, name), chunk_bytes=64 * KiB)
    yield tree, name
    os.unlink(os.path.join(WWW, name))


@pytest.fixture
def s3_env(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", ENDPOINT or "")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", os.environ.get("JTREE_TEST_S3_KEY", "testkey"))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", os.environ.get("JTREE_TEST_S3_SECRET", "testsecret"))
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)


@pytest.fixture
def bucket(s3_env):
    boto3 = pytest.importorskip("boto3")
    s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1")
    name = f"jtree-py-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=name)
    return name


@needs_http
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_load_over_http_and_https(served, scheme, monkeypatch):
    tree, name = served
    monkeypatch.setenv("CURL_CA_BUNDLE", os.environ["JTREE_TEST_CA"])
    base = HTTP if scheme == "http" else HTTPS
    assert_tree_equal(jtree.load(f"{base}/{name}"), tree)
    spec = jtree.load_pytreedef(f"{base}/{name}")
    assert spec["params"]["emb"].shape == (4096, 256)
    assert repr(spec["step"]) == "int"  # a scalar's spec: its type


@needs_http
def test_https_with_an_unknown_ca_fails_clearly(served, monkeypatch):
    _, name = served
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    with pytest.raises(jtree.Error) as e:
        jtree.load(f"{HTTPS}/{name}")
    assert name in str(e.value)


@needs_http
def test_a_slice_fetches_only_its_chunks(served):
    tree, name = served
    with jtree.open(f"{HTTP}/{name}") as f:
        opened = f.io_stats()
        assert opened["read_requests"] <= 2  # head and tail, in parallel
        rows = f["params"]["emb"][1000:1010, :64]
        after = f.io_stats()
    np.testing.assert_array_equal(rows, tree["params"]["emb"][1000:1010, :64])
    # 64 KiB chunks of 256 float32 rows each: the 10 rows lie in one chunk (at most 64 KiB
    # stored), so at most one or two more requests and far less than the 4 MiB leaf.
    fetched = after["bytes_read"] - opened["bytes_read"]
    assert 0 < fetched <= 2 * 64 * KiB
    assert after["read_requests"] - opened["read_requests"] <= 2


@needs_http
def test_a_partial_load_never_fetches_skipped_leaves(served):
    tree, name = served
    with jtree.open(f"{HTTP}/{name}") as f:
        before = f.io_stats()["bytes_read"]
        part = f.load({"params": None, "step": True, "name": True})
        assert f.io_stats()["bytes_read"] == before  # scalars are inline in the header
    assert part["step"] == 1234 and part["name"] == "run-7"


@needs_http
def test_load_through_faults_is_bit_exact(served):
    tree, name = served
    # Each distinct request fails once (503, then a dropped connection) before it is served.
    for faults in ("e503=1", "drop=1", "trunc=1"):
        with jtree.open(f"{PROXY}/{faults}/{name}") as f:
            got = f.load()
            assert f.io_stats()["retries"] > 0, faults
        assert_tree_equal(got, tree)


@needs_http
def test_a_missing_url_is_not_found_naming_it(served):
    url = f"{HTTP}/nope-{uuid.uuid4().hex[:6]}.jtree"
    with pytest.raises(jtree.NotFoundError) as e:
        jtree.load(url)
    assert url in str(e.value)


@needs_http
def test_saving_to_http_is_refused_clearly(tmp_path):
    with pytest.raises(jtree.Error) as e:
        jtree.save({"a": 1}, f"{HTTP}/upload.jtree")
    assert "upload.jtree" in str(e.value)


@needs_s3
def test_s3_save_load_round_trip(bucket):
    tree = checkpoint(1)
    url = f"s3://{bucket}/ckpt/a.jtree"
    jtree.save(tree, url)
    assert_tree_equal(jtree.load(url), tree)
    with jtree.open(url) as f:
        row = f["params"]["emb"][7]
    np.testing.assert_array_equal(row, tree["params"]["emb"][7])


@needs_s3
def test_s3_large_save_is_multipart_and_exact(bucket):
    rng = np.random.default_rng(3)
    # 24 MiB of incompressible bytes: several multipart parts.
    tree = {"x": rng.integers(0, 255, 24 * MiB, dtype=np.uint8)}
    url = f"s3://{bucket}/big.jtree"
    jtree.save(tree, url)
    assert_tree_equal(jtree.load(url), tree)


@needs_s3
def test_s3_partial_write_appends_a_generation(bucket):
    url = f"s3://{bucket}/inc.jtree"
    jtree.save({"a": np.arange(10), "b": None}, url)
    jtree.save({"b": np.ones(3)}, url, partial_write=True)
    got = jtree.load(url)
    np.testing.assert_array_equal(got["a"], np.arange(10))
    np.testing.assert_array_equal(got["b"], np.ones(3))


@needs_s3
def test_s3_nonblocking_save_and_load(bucket):
    tree = checkpoint(2)
    url = f"s3://{bucket}/nb.jtree"
    jtree.nonblocking_save(tree, url).result()
    fut = jtree.nonblocking_load(url)
    assert fut.pytree["params"]["emb"].shape == (4096, 256)
    assert_tree_equal(fut.result(), tree)


@needs_s3
def test_s3_missing_key_and_bad_credentials(bucket, monkeypatch):
    with pytest.raises(jtree.NotFoundError) as e:
        jtree.load(f"s3://{bucket}/missing.jtree")
    assert "missing.jtree" in str(e.value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    with pytest.raises(jtree.Error) as e:
        jtree.save({"a": 1}, f"s3://{bucket}/denied.jtree")
    assert bucket in str(e.value) and "denied.jtree" in str(e.value)
