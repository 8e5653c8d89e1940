"""Many processes, one file, with MPI: real OpenMPI jobs of mpi_worker.py (4 processes on this
machine's cores), mpi4py as the coordinator. Saves of NumPy/torch blocks (GlobalArray) sharded
along different axes, replicated and unsharded leaves; loads on other topologies reading only
their part; a dead process, damaged segments, a commit killed midway and run again; the same
against the S3 server, where the committing process must move only metadata."""
import os
import signal
import subprocess
import sys
import uuid

import numpy as np
import pytest

import jtree
import workload
from conftest import S3_ENDPOINT, assert_job_ok, run_mpi, s3_env
from tcp_relay import Relay

MiB = 1 << 20


def segments(path: str, n: int = 4):
    return [jtree._jtree.segment_path(path, k, n) for k in range(n)]


def visible(d) -> list:
    """The directory's files, without the temporary files a killed writer may leave."""
    return sorted(f for f in os.listdir(d) if not f.startswith("."))


def check_whole(path: str) -> None:
    g = workload.global_arrays()
    out = jtree.load(path)
    for k in ("rows", "cols", "grid", "half"):
        np.testing.assert_array_equal(out["params"][k], g[k])
    np.testing.assert_array_equal(out["repl"], g["repl"])
    np.testing.assert_array_equal(out["plain"], g["plain"])
    assert out["step"] == 1234 and out["config"]["layers"] == [4, 8]


def test_mpi_save_by_4_processes_then_load_by_1_2_and_3(tmp_path):
    path = str(tmp_path / "ckpt.jtree")
    assert_job_ok(4, *run_mpi(4, "save", path))
    assert visible(tmp_path) == ["ckpt-zstd.jtree", "ckpt.jtree"]
    # One process reads the whole files bit-exact.
    check_whole(path)
    g = workload.global_arrays()
    out = jtree.load(str(tmp_path / "ckpt-zstd.jtree"))
    for k in ("rows", "cols", "grid", "half"):
        np.testing.assert_array_equal(out["params"][k], g[k])
    assert out["step"] == 1235 and jtree.open(path).verify()["ok"]
    # Two and three processes, each reading only its blocks of another split.
    for n in (2, 3):
        assert_job_ok(n, *run_mpi(n, "load", path))


def test_mpi_uneven_splits_have_few_chunks_and_the_single_process_size(tmp_path):
    """np.array_split blocks (issue 19): the chunk grid is cut at every block edge (rectilinear
    where no common divisor helps), so the file has at most the single-process chunk count plus
    the number of blocks and is within 1% of the single-process file's size."""
    path = str(tmp_path / "uneven.jtree")
    assert_job_ok(4, *run_mpi(4, "uneven", path))
    single = str(tmp_path / "single.jtree")
    jtree.save(workload.uneven_arrays(), single, compression=None)
    multi_info, single_info = jtree.open(path).info(), jtree.open(single).info()
    blocks = sum(len(workload.uneven_blocks(k)) for k in workload.uneven_arrays())
    assert multi_info["num_chunks"] <= single_info["num_chunks"] + blocks, \
        (multi_info, single_info)
    assert multi_info["file_size"] <= single_info["file_size"] * 1.01, (multi_info, single_info)
    assert multi_info["min_read_version"] == 2
    print(f"uneven: {multi_info['num_chunks']} chunks, {multi_info['file_size']} bytes; "
          f"single process {single_info['num_chunks']} chunks, "
          f"{single_info['file_size']} bytes")


def test_mpi_a_dead_process_fails_the_save_and_the_commit(tmp_path):
    path = str(tmp_path / "ckpt.jtree")
    rc, out = run_mpi(4, "die", path)
    assert rc != 0, out[-3000:]
    assert not os.path.exists(path)
    present = [os.path.exists(s) for s in segments(path)]
    assert present == [True, True, False, True], present
    # Finishing the save by hand names the missing segment and creates nothing.
    with pytest.raises(jtree.NotFoundError, match=r"segment 2 of 4 is missing"):
        jtree.commit_segments(path, 4)
    assert not os.path.exists(path)


def _flip(p: str, offset: int) -> bytes:
    with open(p, "r+b") as f:
        f.seek(offset)
        old = f.read(1)
        f.seek(offset)
        f.write(bytes([old[0] ^ 0x5A]))
    return old


def _restore(p: str, offset: int, old: bytes) -> None:
    with open(p, "r+b") as f:
        f.seek(offset)
        f.write(old)


def test_mpi_commit_refuses_damaged_segments_and_survives_a_crash(tmp_path):
    path = str(tmp_path / "ckpt.jtree")
    rc, out = run_mpi(4, "no_commit", path)
    assert rc != 0, out[-3000:]
    segs = segments(path)
    assert all(os.path.exists(s) for s in segs) and not os.path.exists(path)

    # A damaged header (after the 128-byte preamble; every segment carries it, checksummed):
    # refused, nothing created.
    old = _flip(segs[1], 128 + 16)
    with pytest.raises(jtree.CorruptionError, match=r"seg-00001-of-00004"):
        jtree.commit_segments(path, 4)
    assert not os.path.exists(path) and all(os.path.exists(s) for s in segs)
    _restore(segs[1], 128 + 16, old)

    # Damaged data: found by a verifying commit; without verification the commit copies the
    # chunks as they are and reading them reports the damage (never wrong data).
    middle = os.path.getsize(segs[3]) // 2
    old = _flip(segs[3], middle)
    with pytest.raises(jtree.CorruptionError, match=r"seg-00003-of-00004"):
        jtree.commit_segments(path, 4, verify=True)
    assert not os.path.exists(path)
    jtree.commit_segments(path, 4, keep_segments=True)
    with pytest.raises(jtree.CorruptionError):
        jtree.load(path)
    assert not jtree.open(path).verify()["ok"]
    os.remove(path)
    _restore(segs[3], middle, old)

    # A commit killed midway (after its first segment): no target, the segments intact.
    code = ("import os, signal, jtree; jtree.commit_segments(%r, 4, progress=lambda done, "
            "total: os.kill(os.getpid(), signal.SIGKILL))" % path)
    p = subprocess.run([sys.executable, "-c", code], check=False)
    assert p.returncode == -signal.SIGKILL
    assert not os.path.exists(path) and all(os.path.exists(s) for s in segs)

    # Run again: the file appears, complete, and the segments go.
    stats = jtree.commit_segments(path, 4)
    assert stats.raw_bytes == workload.chunked_bytes() and stats.leaves == 12
    assert visible(tmp_path) == ["ckpt.jtree"]
    check_whole(path)
    assert jtree.open(path).verify()["ok"]


@pytest.fixture
def bucket(monkeypatch):
    if not S3_ENDPOINT:
        pytest.skip("no S3 server (JTREE_TEST_S3_ENDPOINT; scripts/test_multihost.sh starts one)")
    for k, v in s3_env().items():
        monkeypatch.setenv(k, v)
    import boto3  # noqa: PLC0415

    s3 = boto3.client("s3", endpoint_url=S3_ENDPOINT)
    name = "mh-" + uuid.uuid4().hex[:12]
    s3.create_bucket(Bucket=name)
    return name, s3


def test_mpi_save_to_s3_and_a_commit_that_moves_only_metadata(bucket):
    name, s3 = bucket
    url = f"s3://{name}/job/ckpt.jtree"
    # 4 processes write their segments to S3 (24 MiB more each), then the job dies before
    # its commit.
    rc, out = run_mpi(4, "no_commit", url, env={**s3_env(), "JTREE_MH_BIG": "1"})
    assert rc != 0, out[-3000:]
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=name)["Contents"])
    assert keys == sorted(s[len(f"s3://{name}/"):] for s in segments(url)), keys
    seg_bytes = sum(s3.head_object(Bucket=name, Key=k)["ContentLength"] for k in keys)
    # The commit, in a process of its own that reaches S3 through a relay counting its bytes.
    relay = Relay(int(S3_ENDPOINT.rsplit(":", 1)[1]))
    try:
        env = {**os.environ, **s3_env(f"http://127.0.0.1:{relay.port}")}
        code = "import jtree, sys; print(tuple(jtree.commit_segments(sys.argv[1], 4)))"
        p = subprocess.run([sys.executable, "-c", code, url], env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        assert p.returncode == 0, p.stdout
        sent, received = relay.sent, relay.received
    finally:
        relay.close()
    head = s3.head_object(Bucket=name, Key="job/ckpt.jtree")
    # The data is copied on the server side (UploadPartCopy), in whole blocks: segment 0's from
    # its copy of the checkpoint head on, then each segment's padded data (spec 11.1), every
    # one over the 5 MiB part minimum. What passes through the committing process: the opening
    # reads of the segments (their first and last 64 KiB) and, uploaded, only the index and
    # footer, whatever the data size.
    assert seg_bytes > 96 * MiB
    assert sent < 256 * 1024, (sent, seg_bytes)
    assert received < 2 * MiB, (received, seg_bytes)
    assert head["ContentLength"] >= seg_bytes - 4 * MiB
    print(f"\ncommit of {seg_bytes / MiB:.1f} MiB of segments: {sent / MiB:.2f} MiB sent, "
          f"{received / MiB:.2f} MiB received by the committing process")
    # The segments are gone; the file is complete and exact.
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=name)["Contents"]]
    assert keys == ["job/ckpt.jtree"], keys
    with jtree.open(url) as f:
        assert f.verify()["ok"]
        g = workload.global_arrays()
        np.testing.assert_array_equal(f["params"]["rows"][1000:2000], g["rows"][1000:2000])
        big = f["big"]
        r = workload.BIG_ROWS_PER_PROCESS[0]
        for k in range(4):
            np.testing.assert_array_equal(big[k * r:k * r + 7], workload.big_block(k)[:7])


def test_mpi_collective_save_to_s3(bucket):
    name, s3 = bucket
    url = f"s3://{name}/ckpt.jtree"
    assert_job_ok(4, *run_mpi(4, "save", url, env=s3_env()))
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket=name)["Contents"]]
    assert sorted(keys) == ["ckpt-zstd.jtree", "ckpt.jtree"], keys  # no segment left
    check_whole(url)
    out = jtree.load(f"s3://{name}/ckpt-zstd.jtree")
    np.testing.assert_array_equal(out["params"]["grid"], workload.global_arrays()["grid"])
    assert out["step"] == 1235


@pytest.mark.parametrize("where", ["local", "s3"])
def test_mpi_save_never_replaces_a_file_that_is_not_a_jtree_file(where, tmp_path, request):
    """The commit checks the target as a single-process save does: refused in every process,
    the foreign file intact and no segment left; forced with overwrite_foreign=True."""
    text = b"precious notes, not a checkpoint\n"
    if where == "local":
        path, env = str(tmp_path / "notes.txt"), {}
        with open(path, "wb") as f:
            f.write(text)

        def content():
            with open(path, "rb") as f:
                return f.read()

        def leftovers():
            return [s for s in segments(path) if os.path.exists(s)]
    else:
        name, s3 = request.getfixturevalue("bucket")
        path, env = f"s3://{name}/job/notes.txt", s3_env()
        s3.put_object(Bucket=name, Key="job/notes.txt", Body=text)

        def content():
            return s3.get_object(Bucket=name, Key="job/notes.txt")["Body"].read()

        def leftovers():
            got = s3.list_objects_v2(Bucket=name).get("Contents", [])
            return [o["Key"] for o in got if o["Key"] != "job/notes.txt"]
    assert_job_ok(4, *run_mpi(4, "foreign", path, env=env))
    assert content() == text
    assert leftovers() == []
    assert_job_ok(4, *run_mpi(4, "foreign", path, env={**env, "JTREE_MH_FORCE": "1"}))
    assert content().startswith(b"\x89JTREE")
    assert leftovers() == []
