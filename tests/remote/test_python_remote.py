"""The Python package over the real servers: jtree.save/load/open with https:// and s3:// URLs
behave as with local paths, and partial reads fetch only what they need (read statistics).

Run by scripts/test_remote.sh, which starts nginx (HTTP and HTTPS), the fault proxy and Ceph RGW
and exports JTREE_TEST_*; the jtree package must be installed in the interpreter running pytest.
"""
import dataclasses
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


def _clear_aws_env(monkeypatch, tmp_path):
    """No AWS setting in the environment, and no shared files (HOME is an empty directory)."""
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID",
                 "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
                 "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE",
                 "AWS_SHARED_CREDENTIALS_FILE", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


@needs_s3
def test_s3_settings_only_through_remote_options(bucket, monkeypatch, tmp_path):
    # Endpoint, credentials and region given per call, nothing in the environment: two stores
    # could be used side by side in one process this way.
    _clear_aws_env(monkeypatch, tmp_path)
    rgw = jtree.RemoteOptions(endpoint=ENDPOINT, region="us-east-1", addressing="path",
                              access_key_id=os.environ.get("JTREE_TEST_S3_KEY", "testkey"),
                              secret_access_key=os.environ.get("JTREE_TEST_S3_SECRET",
                                                               "testsecret"),
                              max_concurrency=4, max_retries=2, part_size=5 * MiB,
                              upload_concurrency=2)
    tree = checkpoint(4)
    url = f"s3://{bucket}/opts/a.jtree"
    jtree.save(tree, url, remote=rgw)  # 4 MiB of emb and more: a multipart upload of 5 MiB parts
    assert_tree_equal(jtree.load(url, remote=rgw), tree)
    with jtree.open(url, remote=rgw) as f:
        np.testing.assert_array_equal(f["params"]["emb"][9], tree["params"]["emb"][9])
    assert jtree.load_pytreedef(url, remote=rgw)["params"]["emb"].shape == (4096, 256)
    # ("emb" is no default vocabulary name: the rule says it.)
    plan = jtree.TensorParallel(1, 2, rules={"emb": "vocab"}).plan(url, remote=rgw)
    assert plan["params/emb"] == ("vocab", (slice(2048, 4096), slice(0, 256)))  # vocabulary rows
    assert_tree_equal(jtree.nonblocking_load(url, remote=rgw).result(), tree)
    jtree.nonblocking_save({"b": np.ones(3)}, url, partial_write=True, remote=rgw).result()
    np.testing.assert_array_equal(jtree.load(url, remote=rgw)["b"], np.ones(3))
    # The same call without them: anonymous requests to AWS's endpoint, never the test store.
    # (The machines running the tests reach no cloud: any error will do, as long as it is not
    # a success.)
    with pytest.raises(jtree.Error):
        jtree.load_pytreedef(url, remote=jtree.RemoteOptions(max_retries=0, deadline=10))
    # Wrong credentials per call are refused by the store, naming the object.
    bad = dataclasses.replace(rgw, secret_access_key="wrong")
    with pytest.raises(jtree.PermissionDeniedError, match="a.jtree"):
        jtree.load(url, remote=bad)


@needs_s3
def test_convert_to_s3_with_remote_options_and_the_cli_flags(bucket, monkeypatch, tmp_path):
    # jtree.convert(remote=) and `python -m jtree.convert` with --endpoint/--profile: the
    # .jtree destination on the store, verified there, nothing in the environment.
    _clear_aws_env(monkeypatch, tmp_path)
    src = str(tmp_path / "m.npz")
    tensors = {"w": np.arange(3000, dtype=np.float32).reshape(30, 100),
               "b": np.ones(7, np.int16)}
    np.savez(src, **tensors)
    rgw = jtree.RemoteOptions(endpoint=ENDPOINT, region="us-east-1", addressing="path",
                              access_key_id=os.environ.get("JTREE_TEST_S3_KEY", "testkey"),
                              secret_access_key=os.environ.get("JTREE_TEST_S3_SECRET",
                                                               "testsecret"))
    url = f"s3://{bucket}/convert/m.jtree"
    stats = jtree.convert(src, url, verify=True, remote=rgw)
    assert stats.verified and stats.leaves == 2
    back = jtree.load(url, remote=rgw)
    for k, v in tensors.items():
        np.testing.assert_array_equal(back[k], v)
    # The CLI: credentials from a profile, the endpoint as a flag.
    _rgw_profile_credentials(monkeypatch, tmp_path)
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    url2 = f"s3://{bucket}/convert/cli.jtree"
    r = subprocess.run([sys.executable, "-m", "jtree.convert", src, url2, "--endpoint", ENDPOINT,
                        "--profile", "rgw", "--region", "us-east-1", "--addressing", "path",
                        "--retries", "2", "--verify", "-q"],
                       capture_output=True, text=True, env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(jtree.load(url2, remote=rgw)["w"], tensors["w"])


@needs_s3
def test_s3_endpoint_from_a_services_section(bucket, monkeypatch, tmp_path):
    # The shared config's `services = NAME` and [services NAME] s3 endpoint_url, as boto3 reads
    # them; keys from the credentials file of the same profile.
    _clear_aws_env(monkeypatch, tmp_path)
    config = tmp_path / "config"
    config.write_text(
        "[profile rgw]\n"
        "region = us-east-1\n"
        "services = local-rgw\n"
        "endpoint_url = http://127.0.0.1:9\n"  # the profile's global one: not used
        "\n"
        "[services local-rgw]\n"
        "s3 =\n"
        f"  endpoint_url = {ENDPOINT}\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    _rgw_profile_credentials(monkeypatch, tmp_path)
    tree = {"w": np.arange(1000, dtype=np.float32), "step": 3}
    url = f"s3://{bucket}/services.jtree"
    # The profile named per call...
    jtree.save(tree, url, remote=jtree.RemoteOptions(profile="rgw"))
    assert_tree_equal(jtree.load(url, remote=jtree.RemoteOptions(profile="rgw")), tree)
    # ... or by AWS_PROFILE, as boto3 takes it.
    monkeypatch.setenv("AWS_PROFILE", "rgw")
    assert_tree_equal(jtree.load(url), tree)
    # Checked against boto3 itself, where it is new enough to read [services] sections.
    boto3 = pytest.importorskip("boto3")
    import botocore  # noqa: PLC0415
    if tuple(int(x) for x in botocore.__version__.split(".")[:2]) < (1, 31):
        pytest.skip("botocore < 1.31 reads no [services] sections")
    body = boto3.Session(profile_name="rgw").client("s3").get_object(
        Bucket=bucket, Key="services.jtree")["Body"].read()
    assert body[:4] == open_jtree_magic()
    # AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true: the section is ignored (AWS's endpoint, which
    # these machines do not reach: an error, not the test store's object).
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    with pytest.raises(jtree.Error):
        jtree.load_pytreedef(url, remote=jtree.RemoteOptions(max_retries=0, deadline=10))


def _rgw_profile_credentials(monkeypatch, tmp_path):
    """A shared credentials file whose profile "rgw" holds the test store's keys, in use."""
    creds = tmp_path / "credentials"
    creds.write_text(
        "[rgw]\n"
        f"aws_access_key_id = {os.environ.get('JTREE_TEST_S3_KEY', 'testkey')}\n"
        f"aws_secret_access_key = {os.environ.get('JTREE_TEST_S3_SECRET', 'testsecret')}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))


def open_jtree_magic():
    """The first bytes of every .jtree file."""
    return jtree.dumps({})[:4]


@needs_s3
def test_cli_remote_flags_reach_the_store(bucket, monkeypatch, tmp_path):
    # jtree ls/get with the endpoint and the profile as flags, nothing in the environment.
    cli = os.environ.get("JTREE_CLI")
    if not cli:
        pytest.skip("JTREE_CLI not set (scripts/test_remote.sh sets it)")
    import subprocess  # noqa: PLC0415
    _clear_aws_env(monkeypatch, tmp_path)
    _rgw_profile_credentials(monkeypatch, tmp_path)
    url = f"s3://{bucket}/cli.jtree"
    jtree.save({"w": np.arange(10, dtype=np.int32)}, url,
               remote=jtree.RemoteOptions(endpoint=ENDPOINT, profile="rgw", region="us-east-1"))
    flags = ["--endpoint", ENDPOINT, "--profile", "rgw", "--region", "us-east-1",
             "--concurrency", "2", "--retries", "1"]
    r = subprocess.run([cli, "get", *flags, url, "w[3]"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "3", r.stdout
    # Without the flags: AWS's endpoint, anonymous; not the test store's object.
    r = subprocess.run([cli, "get", "--retries", "0", "--timeout", "10", url, "w[3]"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "3" not in r.stdout.split(), r.stdout
