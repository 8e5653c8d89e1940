"""Errors of the native module come through jtree's one error channel: the class of the
library's status code (each also the builtin a caller would catch), with ``.file`` and
``.key_path`` where the native side knows them."""
import os

import numpy as np
import pytest

import jtree
from jtree import _jtree
from jtree._errors import ArgumentTypeError, IndexOutOfRangeError


def damaged_file(tmp_path):
    """A file whose leaf params/w (raw chunks) has a flipped byte: (path, w)."""
    path = str(tmp_path / "damaged.jtree")
    w = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
    jtree.save({"params": {"b": np.ones(3, np.float32), "w": w}}, path, compression=None)
    data = bytearray(open(path, "rb").read())
    at = data.find(w.tobytes()[:64])
    assert at > 0
    data[at + 100] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(data))
    return path, w


@pytest.mark.parametrize("mmap", [True, False])
def test_a_checksum_mismatch_names_file_and_key_path(tmp_path, mmap):
    path, _ = damaged_file(tmp_path)
    with pytest.raises(jtree.CorruptionError, match="checksum mismatch") as e:
        jtree.load(path, mmap=mmap)
    assert (e.value.file, e.value.key_path) == (path, "params/w")


def test_a_slice_of_a_damaged_leaf_names_file_and_key_path(tmp_path):
    path, _ = damaged_file(tmp_path)
    with jtree.open(path, mmap=False) as f:
        with pytest.raises(jtree.CorruptionError) as e:
            f["params"]["w"][10:20]
    assert (e.value.file, e.value.key_path) == (path, "params/w")


def test_opening_a_missing_file_names_it(tmp_path):
    path = str(tmp_path / "missing.jtree")
    with pytest.raises(jtree.NotFoundError) as e:
        _jtree.Reader.open(path, True, None, False, None)
    assert isinstance(e.value, FileNotFoundError)
    assert (e.value.file, e.value.key_path) == (path, None)


def test_a_request_the_library_refuses_names_its_leaf(tmp_path):
    path = str(tmp_path / "a.jtree")
    jtree.save({"params": {"w": np.zeros(10, np.float32)}}, path)
    r = _jtree.Reader.open(path, False, None, False, None)
    with pytest.raises(jtree.InvalidArgumentError, match="destination of 4 bytes") as e:
        r.read_many([(0, None, None, np.empty(4, np.uint8))], True, 0, 0, None)
    assert isinstance(e.value, ValueError)
    assert (e.value.file, e.value.key_path) == (path, "params/w")
    # The staging pipeline (through the host stand-in engine) names the same place.
    with pytest.raises(jtree.InvalidArgumentError) as e:
        r._read_staged_host_for_tests([(0, None, np.empty(4, np.uint8).ctypes.data, 4)])
    assert (e.value.file, e.value.key_path) == (path, "params/w")


def test_misuse_of_the_module_raises_jtree_classes(tmp_path):
    path = str(tmp_path / "a.jtree")
    jtree.save({"w": np.zeros(2)}, path)
    r = _jtree.Reader.open(path, False, None, False, None)
    # A malformed request: InvalidArgumentError, still a ValueError.
    with pytest.raises(jtree.InvalidArgumentError, match="requests are") as e:
        r.read_many([(0,)], True, 0, 0, None)
    assert isinstance(e.value, ValueError)
    # A leaf number out of range: also an IndexError.
    with pytest.raises(IndexOutOfRangeError) as e:
        r.chunks(99)
    assert isinstance(e.value, IndexError) and isinstance(e.value, jtree.InvalidArgumentError)
    # An argument of the wrong type: also a TypeError.
    with pytest.raises(ArgumentTypeError) as e:
        _jtree.split_key_path(3)
    assert isinstance(e.value, TypeError) and isinstance(e.value, jtree.InvalidArgumentError)


def test_a_failed_write_names_its_file(tmp_path):
    path = str(tmp_path / "no" / "such" / "dir" / "a.jtree")
    with pytest.raises(jtree.Error) as e:
        jtree.save({"w": np.zeros(2)}, path)
    assert e.value.file == path
    assert not os.path.exists(path)


def test_an_array_dlpack_cannot_import_names_its_place():
    with pytest.raises(jtree.InvalidArgumentError, match="cannot save a object through DLPack") as e:
        _jtree.dlpack_info(object(), "f.jtree", ("a", "b"))
    assert (e.value.file, e.value.key_path) == ("f.jtree", "a/b")
    assert str(e.value).startswith("f.jtree: at 'a/b': ")
    assert tuple(_jtree.dlpack_info(np.zeros((2, 3), np.float32))[1]) == (2, 3)


def test_saving_an_array_dlpack_cannot_import_names_its_place(tmp_path):
    class NotReallyDLPack:
        def __dlpack_device__(self):
            return (1, 0)  # kDLCPU

        def __dlpack__(self, *args, **kwargs):
            return "not a capsule"

    path = str(tmp_path / "a.jtree")
    with pytest.raises(jtree.InvalidArgumentError, match="through DLPack") as e:
        jtree.save({"a": [np.zeros(1), NotReallyDLPack()]}, path)
    assert (e.value.file, e.value.key_path) == (path, "a/1")
