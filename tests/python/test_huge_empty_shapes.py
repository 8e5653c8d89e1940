"""Empty arrays whose other dimensions are huge: the format bounds every dimension by 2^58
(spec/FORMAT.md 6.2), even when another is 0; within that bound an empty array can still have a
shape no NumPy or torch array can take (the product of its non-zero dimensions times the item
size at or over 2^63). Such a leaf opens, its slices that NumPy can represent read as empty
arrays, and loading it whole is a clear NotSupportedError; over the bound the file is refused
on open. The files are made by editing a saved file's shape and recomputing the hashes, as a
hostile writer would."""
import struct

import numpy as np
import pytest

import jtree
from conftest import fuzz_harness


def _with_shape(tmp_path, shape):
    """A file with one float64 leaf 'x' of ``shape`` (which has a 0 as its first dimension)."""
    assert shape[0] == 0
    small = (0,) + tuple(range(3, 3 + len(shape) - 1))  # distinctive placeholder dimensions
    p = str(tmp_path / "huge.jtree")
    jtree.save({"x": np.zeros(small, np.float64)}, p)
    with open(p, "rb") as f:
        data = bytearray(f.read())
    old = struct.pack(f"<{len(small)}Q", *small)
    assert data.count(old) == 1, "the shape vector is not where the test expects it"
    at = data.index(old)
    data[at:at + len(old)] = struct.pack(f"<{len(shape)}Q", *shape)
    fuzz_harness().rehash(data)  # the hash repair of fuzz/python/fuzz_load.py
    with open(p, "wb") as out:
        out.write(data)
    return p


def test_an_empty_array_as_large_as_numpy_allows_reads_back(tmp_path):
    p = _with_shape(tmp_path, (0, 2 ** 58, 2))
    with jtree.open(p) as f:
        assert f["x"].shape == (0, 2 ** 58, 2)
        a = f["x"][:, -3:]
        assert a.shape == (0, 3, 2) and a.dtype == np.float64
    with jtree.open(p) as f:
        assert f["x"][:, ::2 ** 57].shape == (0, 2, 2)  # (a huge step: no ssize_t overflow)


def test_an_empty_array_no_array_library_can_hold_is_not_supported(tmp_path):
    p = _with_shape(tmp_path, (0, 2 ** 40, 2 ** 40))
    with jtree.open(p) as f:
        assert f["x"].shape == (0, 2 ** 40, 2 ** 40)
        assert f["x"][:, :2, :5].shape == (0, 2, 5)
        with pytest.raises(jtree.NotSupportedError, match="too large for NumPy"):
            f["x"][...]
    with pytest.raises(jtree.NotSupportedError, match="'x'.*too large"):
        jtree.load(p)


@pytest.mark.parametrize("dim", [2 ** 58 + 1, 2 ** 63, 2 ** 64 - 1])
def test_a_dimension_over_the_bound_is_refused_on_open(tmp_path, dim):
    p = _with_shape(tmp_path, (0, dim))
    with pytest.raises(jtree.CorruptionError, match="'?x'?: shape too large"):
        jtree.open(p)
