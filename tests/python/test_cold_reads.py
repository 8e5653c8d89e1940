"""Cold reads (lib/src/read/cold_reads.h): jtree.load of a compressed file whose pages are not
in the page cache reads it with O_DIRECT and gives the same arrays as a warm load; a warm file
and a file system that refuses O_DIRECT read buffered; the raw leaves a load maps stay views of
the file's map (the page cache), cold or not."""
import os
import subprocess
import tempfile

import numpy as np
import pytest

import jtree
from jtree import _jtree

from page_cache import evict


def _fs_type(path):
    out = subprocess.run(["stat", "-f", "-c", "%T", path], capture_output=True, text=True)
    return out.stdout.strip()


@pytest.fixture
def disk_dir():
    """A directory on a disk file system (/var/tmp): a tmpfs file is never cold."""
    if _fs_type("/var/tmp") in ("tmpfs", "ramfs", ""):
        msg = f"/var/tmp is on {_fs_type('/var/tmp') or '?'} here: no cold read to test"
        if os.environ.get("JTREE_TEST_REQUIRE_ALL") == "1":
            pytest.fail(msg + " -- and JTREE_TEST_REQUIRE_ALL=1 forbids skipping")
        pytest.skip(msg)
    with tempfile.TemporaryDirectory(prefix="jtree-cold-", dir="/var/tmp") as d:
        yield d


def _tree(raw=False):
    """Weights-like float32 (compressible: zstd keeps them compressed) of about 6 MiB; with
    `raw`, an odd-sized int8 array beside them, whose chunks end off every block boundary.
    (Not beside compressed leaves: a mapped leaf's page faults read ahead megabytes around
    them, which would leave a small file's compressed chunks in the page cache.)"""
    rng = np.random.default_rng(5)
    tree = {"w": (rng.standard_normal((1500, 1000)) * 0.02).astype(np.float32)}
    if raw:
        tree["b"] = rng.integers(-128, 127, size=3_000_007, dtype=np.int8)
    return tree


def _check(got, want):
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k])


def test_cold_compressed_load_reads_with_o_direct(disk_dir):
    path = os.path.join(disk_dir, "cold.jtree")
    tree = _tree()
    jtree.save(tree, path)
    evict(path)
    before = _jtree._cold_direct_bytes_for_tests()
    _check(jtree.load(path), tree)
    assert _jtree._cold_direct_bytes_for_tests() - before > os.path.getsize(path) // 2
    # Warm (read into the page cache): buffered, the same arrays.
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    before = _jtree._cold_direct_bytes_for_tests()
    _check(jtree.load(path), tree)
    assert _jtree._cold_direct_bytes_for_tests() == before


def test_cold_load_where_o_direct_is_refused_reads_buffered(disk_dir):
    path = os.path.join(disk_dir, "refused.jtree")
    tree = _tree()
    jtree.save(tree, path)
    evict(path)
    _jtree._refuse_direct_open_for_tests(True)
    try:
        before = _jtree._cold_direct_bytes_for_tests()
        _check(jtree.load(path), tree)
        assert _jtree._cold_direct_bytes_for_tests() == before
    finally:
        _jtree._refuse_direct_open_for_tests(False)


def test_cold_raw_load_maps_the_file(disk_dir):
    path = os.path.join(disk_dir, "raw.jtree")
    tree = _tree(raw=True)
    jtree.save(tree, path, compression=None)
    evict(path)
    before = _jtree._cold_direct_bytes_for_tests()
    _check(jtree.load(path), tree)
    assert _jtree._cold_direct_bytes_for_tests() == before
