"""Cross-checks of jtree's S3 backend with boto3/botocore, and of the CLI against real servers.

Run by scripts/test_remote.sh (which starts the servers and exports JTREE_TEST_*):
  JTREE_REMOTE_TOOL  the jtree_remote_tool binary (tests/remote/remote_tool.cc)
  JTREE_CLI          the jtree command
Without the servers' variables every test is skipped.
"""
import datetime
import hashlib
import json
import os
import subprocess
import time
import uuid

import pytest

boto3 = pytest.importorskip("boto3")
import botocore.auth  # noqa: E402
import botocore.awsrequest  # noqa: E402
import botocore.credentials  # noqa: E402
from boto3.s3.transfer import TransferConfig  # noqa: E402
from botocore.config import Config  # noqa: E402

ENDPOINT = os.environ.get("JTREE_TEST_S3_ENDPOINT")
KEY = os.environ.get("JTREE_TEST_S3_KEY", "testkey")
SECRET = os.environ.get("JTREE_TEST_S3_SECRET", "testsecret")
TOOL = os.environ.get("JTREE_REMOTE_TOOL")
CLI = os.environ.get("JTREE_CLI")
MiB = 1 << 20

needs_s3 = pytest.mark.skipif(not ENDPOINT or not TOOL, reason="no S3 server (scripts/test_remote.sh)")
needs_http = pytest.mark.skipif(not os.environ.get("JTREE_TEST_HTTP") or not CLI,
                                reason="no nginx (scripts/test_remote.sh)")


def jtree_env(**extra):
    env = dict(os.environ)
    env.update(AWS_ENDPOINT_URL_S3=ENDPOINT or "", AWS_ACCESS_KEY_ID=KEY,
               AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION="us-east-1")
    env.pop("AWS_PROFILE", None)
    env.update(extra)
    return env


def tool(*args, check=True, **env):
    r = subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True,
                       env=jtree_env(**env), timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"jtree_remote_tool {' '.join(map(str, args))}: {r.stderr}")
    return r


@pytest.fixture(scope="module")
def s3():
    return boto3.client("s3", endpoint_url=ENDPOINT, aws_access_key_id=KEY,
                        aws_secret_access_key=SECRET, region_name="us-east-1",
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      retries={"max_attempts": 1}))


@pytest.fixture(scope="module")
def bucket(s3):
    name = "jtree-boto-" + uuid.uuid4().hex[:8]
    s3.create_bucket(Bucket=name)
    return name


# ---- objects written by one side are read by the other --------------------------------------

@needs_s3
@pytest.mark.parametrize("leaves,size", [(3, 10_000), (4, 4 * MiB)])  # one PUT; multipart
def test_jtree_writes_boto3_reads(s3, bucket, tmp_path, leaves, size):
    key = f"from-jtree/{leaves}x{size}.jtree"
    out = json.loads(tool("write", f"s3://{bucket}/{key}", 7, leaves, size).stdout)
    body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert len(body) == out["file_size"]
    local = tmp_path / "copy.jtree"
    local.write_bytes(body)
    tool("check", local, 7, leaves, size)  # every leaf bit-exact, every checksum verified
    head = s3.head_object(Bucket=bucket, Key=key)
    assert head["ContentLength"] == len(body)
    if size > MiB:
        assert "-" in head["ETag"]  # a multipart object


@needs_s3
def test_boto3_writes_jtree_reads(s3, bucket, tmp_path):
    local = tmp_path / "model.jtree"
    tool("write", local, 9, 3, 5 * MiB)
    key = "from-boto3/model.jtree"
    s3.upload_file(str(local), bucket, key,
                   Config=TransferConfig(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB))
    assert "-" in s3.head_object(Bucket=bucket, Key=key)["ETag"]
    tool("check", f"s3://{bucket}/{key}", 9, 3, 5 * MiB)


@needs_s3
@pytest.mark.parametrize("n", [0, 1, 5 * MiB - 1, 5 * MiB, 5 * MiB + 1, 17 * MiB + 123])
def test_raw_bytes_both_ways(s3, bucket, tmp_path, n):
    data = hashlib.shake_256(str(n).encode()).digest(n) if n else b""
    src = tmp_path / "in.bin"
    src.write_bytes(data)
    tool("put", f"s3://{bucket}/raw/jtree-{n}", src)
    assert s3.get_object(Bucket=bucket, Key=f"raw/jtree-{n}")["Body"].read() == data
    s3.put_object(Bucket=bucket, Key=f"raw/boto-{n}", Body=data)
    out = tmp_path / "out.bin"
    tool("get", f"s3://{bucket}/raw/boto-{n}", out)
    assert out.read_bytes() == data


@needs_s3
def test_failed_save_leaves_no_object_and_no_upload(s3, bucket):
    key = "cancelled/x.jtree"
    r = tool("write-cancel", f"s3://{bucket}/{key}", 3, 4, 4 * MiB, check=False)
    assert r.returncode != 0
    assert "cancel" in r.stderr
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="cancelled/")
    assert listed.get("KeyCount", 0) == 0
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u for u in uploads if u["Key"] == key] == []


@needs_s3
def test_wrong_credentials_fail_fast_naming_bucket_and_key(bucket):
    tool("write", f"s3://{bucket}/creds.jtree", 1, 1, 1000)
    start = time.monotonic()
    r = subprocess.run([CLI, "ls", f"s3://{bucket}/creds.jtree"], capture_output=True, text=True,
                       env=jtree_env(AWS_SECRET_ACCESS_KEY="wrong"), timeout=60)
    assert r.returncode != 0
    assert time.monotonic() - start < 5
    assert "SignatureDoesNotMatch" in r.stderr
    assert f'bucket "{bucket}"' in r.stderr and 'key "creds.jtree"' in r.stderr
    assert "gave up" not in r.stderr  # not retried


# ---- the signer agrees with botocore's --------------------------------------------------------

SIGN_CASES = [
    # (method, key, query, headers, body)
    ("GET", "a.jtree", [], {"Range": "bytes=0-65535"}, b""),
    ("GET", "dir/a b+c~é.jtree", [], {"Range": "bytes=-262144", "If-Match": '"abc"'}, b""),
    ("HEAD", "x", [], {}, b""),
    ("PUT", "obj", [], {}, b"hello world" * 1000),
    ("POST", "obj", [("uploads", "")], {}, b""),
    ("PUT", "obj", [("partNumber", "3"), ("uploadId", "2~a/b+c=d")], {}, b"\x00\x01" * 5000),
    ("PUT", "obj", [("partNumber", "1"), ("uploadId", "u")],
     {"x-amz-copy-source": "/bkt/src%20key", "x-amz-copy-source-range": "bytes=0-5242879",
      "x-amz-copy-source-if-match": '"e"'}, b""),
    ("POST", "obj", [("uploadId", "u")], {"Content-Type": "application/xml"},
     b"<CompleteMultipartUpload></CompleteMultipartUpload>"),
    ("DELETE", "obj", [("uploadId", "u")], {}, b""),
    ("GET", "", [("list-type", "2"), ("prefix", "dir/ä b"), ("continuation-token", "t/+="),
                 ("max-keys", "1000")], {}, b""),
]


@pytest.mark.skipif(not TOOL, reason="no jtree_remote_tool")
@pytest.mark.parametrize("token", [None, "session/token+=="])
@pytest.mark.parametrize("case", SIGN_CASES, ids=lambda c: f"{c[0]}-{c[1] or 'bucket'}")
def test_signature_matches_botocore(monkeypatch, tmp_path, case, token):
    method, key, query, headers, body = case
    when = 1_700_000_000
    endpoint = "http://127.0.0.1:7480"
    args = ["sign", endpoint, "bkt", key, method, when]
    args += [f"q:{k}={v}" for k, v in query]
    args += [f"h:{k}: {v}" for k, v in headers.items()]
    if body:
        (tmp_path / "body").write_bytes(body)
        args.append(f"body:{tmp_path / 'body'}")
    env = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret/Key+",
           "AWS_REGION": "eu-west-3", "AWS_SESSION_TOKEN": token or ""}
    ours = json.loads(tool(*args, **env).stdout)

    # botocore's S3 signer on the same request: path-style URL, raw query parameters (botocore
    # encodes them itself), the same extra headers, the same time.
    fixed = datetime.datetime.fromtimestamp(when, datetime.timezone.utc).replace(tzinfo=None)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: fixed)
    path = "/bkt" + ("/" + key if key else "")
    from urllib.parse import quote
    url = endpoint + quote(path, safe="/~")
    req = botocore.awsrequest.AWSRequest(method=method, url=url, headers=dict(headers),
                                         data=body, params=query)
    creds = botocore.credentials.Credentials("AKIDEXAMPLE", "secret/Key+", token)
    botocore.auth.S3SigV4Auth(creds, "s3", "eu-west-3").add_auth(req)
    assert ours["authorization"] == req.headers["Authorization"]
    assert ours["url"].split("?")[0] == url


# ---- the CLI prints the statistics of remote reads ------------------------------------------

@needs_http
def test_cli_ls_prints_requests_bytes_and_retries(tmp_path):
    www = os.environ["JTREE_TEST_WWW"]
    name = f"cli-{uuid.uuid4().hex[:6]}.jtree"
    tool("write", os.path.join(www, name), 5, 2, 100_000)
    env = dict(os.environ, CURL_CA_BUNDLE=os.environ["JTREE_TEST_CA"])
    for base in (os.environ["JTREE_TEST_HTTP"], os.environ["JTREE_TEST_HTTPS"]):
        r = subprocess.run([CLI, "ls", f"{base}/{name}"], capture_output=True, text=True, env=env,
                           timeout=60)
        assert r.returncode == 0, r.stderr
        assert "read 2 requests" in r.stdout and "0 retries" in r.stdout
    # Through the fault proxy: each request answered 503 once, then served.
    r = subprocess.run([CLI, "ls", f"{os.environ['JTREE_TEST_PROXY']}/e503=1/{name}"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "read 4 requests" in r.stdout and "2 retries" in r.stdout
    r = subprocess.run([CLI, "ls", "--json", f"{os.environ['JTREE_TEST_HTTP']}/{name}"],
                       capture_output=True, text=True, env=env, timeout=60)
    io = json.loads(r.stdout)["io"]
    assert io["requests"] == 2 and io["retries"] == 0 and io["bytes_read"] > 0
