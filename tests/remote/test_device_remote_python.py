"""Loads to a device from HTTP(S) and S3, from Python (jtree.load(url, device=...), lazy slices,
DeviceOptions), against the servers scripts/test_remote.sh starts. No GPU needed: the host
stand-in engine (jtree._device.host_stand_in_for_tests) stands for one, so the staging pipeline
and its ranged reads are the real ones. (The C++ side: test_device_remote.cc.)"""
import os
import uuid

import numpy as np
import pytest

import jtree
from jtree import _device

from test_python_remote import HTTP, PROXY, WWW, bucket, checkpoint, needs_http, needs_s3, s3_env  # noqa: F401

KiB = 1 << 10


@pytest.fixture
def torch():
    # (Required, not optional: under JTREE_TEST_REQUIRE_ALL a skip fails; python_env.sh remote
    # installs torch.)
    import torch as t
    return t


def _leaves(tree, kind, prefix=""):
    """key path -> leaf of class ``kind`` of a checkpoint() tree (or of its load)."""
    out = {}
    if isinstance(tree, (dict, list)):
        items = tree.items() if isinstance(tree, dict) else enumerate(tree)
        for k, v in items:
            out.update(_leaves(v, kind, f"{prefix}{k}/"))
    elif isinstance(tree, kind):
        out[prefix[:-1]] = tree
    return out


def _arrays(tree):
    return _leaves(tree, np.ndarray)


def _check_on_device(torch, tree, got):
    want, have = _arrays(tree), _leaves(got, torch.Tensor)
    assert want.keys() == have.keys()
    for k, a in want.items():
        assert have[k].device.type == "cpu", k  # (the stand-in's device)
        assert np.array_equal(have[k].numpy(), a), k
    assert got["step"] == 1234 and got["name"] == "run-7"


@pytest.fixture
def served_raw():
    """A raw (uncompressed) checkpoint in nginx's web root: (tree, name). Raw, so that the
    direct_io / zero_copy settings have raw chunks to refuse for a remote file."""
    tree = checkpoint(3)
    name = f"dev-{uuid.uuid4().hex[:8]}.jtree"
    jtree.save(tree, os.path.join(WWW, name), chunk_bytes=64 * KiB, compression=None)
    yield tree, name
    os.unlink(os.path.join(WWW, name))


@needs_http
def test_a_whole_load_over_http_goes_through_the_staging_pipeline(torch, served_raw):
    tree, name = served_raw
    nbytes = sum(a.nbytes for a in _arrays(tree).values())
    opts = jtree.DeviceOptions(staging_bytes=256 * KiB, staging_buffers=4)
    with _device.host_stand_in_for_tests() as engine:
        got = jtree.load(f"{HTTP}/{name}", device="cpu", device_options=opts)
    _check_on_device(torch, tree, got)
    assert engine["bytes_copied"] == nbytes
    assert engine["peak_pinned_bytes"] <= 256 * KiB
    st = opts.last_stats
    assert st.buffered_bytes == nbytes and st.direct_bytes == 0 and st.zero_copy_bytes == 0
    # Auto O_DIRECT says why not (a remote file), and so does Auto zero copy.
    assert "no O_DIRECT: not a local file" in st.direct_io_note, st
    opts = jtree.DeviceOptions(zero_copy="auto")
    with _device.host_stand_in_for_tests():
        jtree.load(f"{HTTP}/{name}", device="cpu", device_options=opts)
    assert "not a local file" in opts.last_stats.zero_copy_note


@needs_http
def test_through_faults_a_device_load_is_bit_exact(torch, served_raw):
    tree, name = served_raw
    for faults in ("e503=1", "drop=1", "trunc=1"):
        with jtree.open(f"{PROXY}/{faults}/{name}") as f:
            with _device.host_stand_in_for_tests():
                got = f.load(device="cpu")
            assert f.io_stats()["retries"] > 0, faults
        _check_on_device(torch, tree, got)


@needs_http
def test_a_lazy_slice_to_a_device_fetches_only_its_chunks(torch, served_raw):
    tree, name = served_raw
    size = os.path.getsize(os.path.join(WWW, name))
    with jtree.open(f"{HTTP}/{name}", device="cpu") as f:
        before = f.io_stats()["bytes_read"]
        with _device.host_stand_in_for_tests() as engine:
            rows = f["params"]["emb"][1000:1100, 8:24]
        fetched = f.io_stats()["bytes_read"] - before
    assert isinstance(rows, torch.Tensor)
    assert np.array_equal(rows.numpy(), tree["params"]["emb"][1000:1100, 8:24])
    assert engine["bytes_copied"] > 0  # (through the stand-in's copies)
    # 100 rows of 1 KiB in 64 KiB chunks of 64 rows: 2 or 3 chunks, not the 4 MiB leaf.
    assert 0 < fetched <= 4 * 64 * KiB < size, (fetched, size)


@needs_http
@pytest.mark.parametrize("setting, words", [
    (dict(direct_io="on"), "direct_io is On, but O_DIRECT cannot be used: not a local file"),
    (dict(zero_copy="on"), "zero_copy is On, but it cannot be used: not a local file"),
])
def test_settings_a_remote_file_cannot_honour_are_clear_errors(torch, served_raw, setting, words):
    _, name = served_raw
    url = f"{HTTP}/{name}"
    with _device.host_stand_in_for_tests():
        with pytest.raises(jtree.NotSupportedError, match=words) as e:
            jtree.load(url, device="cpu", device_options=jtree.DeviceOptions(**setting))
    assert url in str(e.value)


@needs_s3
def test_a_device_load_from_s3(torch, bucket):
    tree = checkpoint(4)
    url = f"s3://{bucket}/dev.jtree"
    jtree.save(tree, url, chunk_bytes=64 * KiB)
    with _device.host_stand_in_for_tests() as engine:
        got = jtree.load(url, device="cpu")
    _check_on_device(torch, tree, got)
    assert engine["bytes_copied"] == sum(a.nbytes for a in _arrays(tree).values())
