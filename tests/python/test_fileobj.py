"""Bytes and file objects (issue 23 item 4): save into a binary file object, load and open
from a seekable one with range reads, dumps/loads, clear errors for what cannot work, and
bytes from strangers refused without a crash."""
import collections
import io
import os
import threading

import numpy as np
import pytest

import jtree
from conftest import assert_same

Point = collections.namedtuple("Point", ["x", "y"])


def every_leaf_kind():
    rng = np.random.default_rng(5)
    return {
        "arrays": {"f32": rng.standard_normal((64, 33)).astype(np.float32),
                   "i64": np.arange(-5, 5, dtype=np.int64), "u8": np.arange(7, dtype=np.uint8),
                   "bool": np.array([True, False]), "c128": np.ones(3, np.complex128),
                   "f16": np.ones((2, 2), np.float16), "empty": np.zeros((0, 3)),
                   "zero_d": np.array(2.5), "big": np.ones(200_000, np.float64)},
        "scalars": [1, -2 ** 100, 2.5, True, complex(1, -2), np.float32(1.5), np.int16(3)],
        "text": "héllo", "raw": b"\x00\x01", "ba": bytearray(b"ba"), "none": None,
        "tuple": (1, (2, [3])), "nt": Point(np.zeros(2), "y"),
        "od": collections.OrderedDict(b=1, a=2), "empty": {}, "el": [],
    }


def test_save_and_load_through_bytesio():
    tree = every_leaf_kind()
    buf = io.BytesIO()
    stats = jtree.save(tree, buf)
    assert buf.tell() == stats.file_size == len(buf.getvalue())
    buf.seek(0)
    assert_same(jtree.load(buf), tree)
    with jtree.open(io.BytesIO(buf.getvalue())) as f:
        assert f.name == "<BytesIO>"
        assert_same(f["arrays"]["f32"][3:5], tree["arrays"]["f32"][3:5])


def test_the_file_starts_at_the_objects_position():
    tree = {"w": np.arange(10.0)}
    buf = io.BytesIO()
    buf.write(b"PREFIX")
    jtree.save(tree, buf)
    buf.write(b"SUFFIX")  # (after the end: not jtree's, the footer is not last)
    buf.seek(6)
    with pytest.raises(jtree.CorruptionError):
        jtree.load(buf)
    buf.truncate(len(buf.getvalue()) - 6)
    buf.seek(6)
    assert_same(jtree.load(buf), tree)


def test_dumps_and_loads_round_trip_every_leaf_kind():
    tree = every_leaf_kind()
    for options in ({}, {"compression": None}, {"chunk_bytes": 4096, "level": 3}):
        data = jtree.dumps(tree, **options)
        assert isinstance(data, bytes)
        assert_same(jtree.loads(data), tree)
        assert_same(jtree.loads(bytearray(data)), tree)
        assert_same(jtree.loads(memoryview(data)), tree)
    data = jtree.dumps(tree)
    part = jtree.loads(data, keys="arrays/i64", prune=True)
    assert list(part) == ["arrays"] and list(part["arrays"]) == ["i64"]
    with jtree.open(data) as f:
        assert f["arrays"]["big"][10:12].tolist() == [1.0, 1.0]
    with pytest.raises(TypeError):
        jtree.dumps(tree, partial_write=True)


def test_loads_refuses_garbage_without_a_crash():
    good = jtree.dumps({"w": np.arange(1000.0), "s": "x"})
    for data in (b"", b"not a jtree file", b"\0" * 4096, os.urandom(10_000), good[:-1],
                 good[:len(good) // 2], good[1:], bytes(reversed(good))):
        with pytest.raises(jtree.Error):
            jtree.loads(data)
    rng = np.random.default_rng(1)
    for _ in range(200):  # a few flipped bytes anywhere: an error or the right tree
        bad = bytearray(good)
        for i in rng.integers(0, len(bad), 3):
            bad[i] ^= 0xFF
        try:
            jtree.loads(bytes(bad))
        except jtree.Error:
            pass
    with pytest.raises(jtree.InvalidArgumentError):
        jtree.loads("a str is not bytes")


def test_a_real_file_object(tmp_path):
    tree = every_leaf_kind()
    p = str(tmp_path / "f.jtree")
    with open(p, "wb") as f:
        jtree.save(tree, f)
    with open(p, "rb") as f:
        assert_same(jtree.load(f), tree)
        with jtree.open(f) as lazy:
            assert lazy.name == p  # read as the file itself (pread, mmap)
    # At an offset inside a file: read through the file object.
    with open(p, "rb") as f:
        data = f.read()
    with open(p, "wb") as f:
        f.write(b"x" * 100 + data)
    with open(p, "rb") as f:
        f.seek(100)
        assert_same(jtree.load(f), tree)
    # An unbuffered one (raw reads may be short; readinto is repeated).
    with open(p, "rb", buffering=0) as f:
        f.seek(100)
        assert_same(jtree.load(f), tree)


def test_a_non_seekable_object_is_refused_clearly():
    r, w = os.pipe()
    data = jtree.dumps({"w": np.ones(3)})
    assert len(data) < 4096  # (fits in the pipe's buffer)
    os.write(w, data)
    os.close(w)
    with open(r, "rb") as f:
        with pytest.raises(jtree.InvalidArgumentError, match="seekable.*jtree.loads"):
            jtree.load(f)
        with pytest.raises(jtree.InvalidArgumentError, match="seekable"):
            jtree.open(f)
        assert_same(jtree.loads(f.read()), {"w": np.ones(3)})  # what the message advises
    with pytest.raises(jtree.InvalidArgumentError, match="binary mode"):
        jtree.load(io.StringIO("text"))
    with pytest.raises(jtree.InvalidArgumentError, match="binary mode"):
        jtree.save({"a": 1}, io.StringIO())


def test_saving_into_a_pipe_streams_without_seeking():
    tree = {"w": np.arange(100_000.0), "step": 3}
    r, w = os.pipe()
    got = []
    reader = threading.Thread(target=lambda: got.append(os.fdopen(r, "rb").read()))
    reader.start()
    with open(w, "wb") as f:
        jtree.save(tree, f)
    reader.join()
    assert_same(jtree.loads(got[0]), tree)


class CountingBytesIO(io.BytesIO):
    def __init__(self, data):
        super().__init__(data)
        self.read_bytes = 0
        self.calls = 0

    def readinto(self, b):
        n = super().readinto(b)
        self.read_bytes += n
        self.calls += 1
        return n


def test_a_lazy_slice_reads_only_its_chunks():
    w = np.arange(1 << 20, dtype=np.float32).reshape(1024, 1024)  # 4 MiB
    data = jtree.dumps({"w": w}, chunk_bytes=64 << 10, compression=None)
    f = CountingBytesIO(data)
    with jtree.open(f) as lazy:
        opened = f.read_bytes
        assert opened < 200_000  # the header and index, not the data
        assert_same(lazy["w"][100:110], w[100:110])
        sliced = f.read_bytes - opened
        assert 0 < sliced <= 2 * (64 << 10) + 65536, sliced  # one or two chunks (+gap)
        assert lazy.io_stats()["bytes_read"] == f.read_bytes
    assert f.read_bytes < len(data) / 10


def test_a_failed_save_into_a_file_object_takes_its_bytes_back():
    buf = io.BytesIO()
    buf.write(b"KEEP")

    def boom(done, total):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        jtree.save({"w": np.ones(100_000)}, buf, progress=boom)
    assert buf.getvalue() == b"KEEP" and buf.tell() == 4
    with pytest.raises(jtree.NotSupportedError, match="file object"):
        jtree.save({"w": 1}, buf, partial_write=True)


def test_errors_of_the_file_object_name_it():
    data = jtree.dumps({"w": np.ones(1000)}, compression=None)
    f = io.BytesIO(data)
    lazy = jtree.open(f)
    f.close()
    with pytest.raises(jtree.StorageError, match="<BytesIO>"):
        lazy["w"][0:10]


def test_nonblocking_save_and_load_with_file_objects():
    tree = {"w": np.arange(50.0)}
    buf = io.BytesIO()
    jtree.nonblocking_save(tree, buf).result()
    buf.seek(0)
    fut = jtree.nonblocking_load(buf)
    assert fut.pytree["w"].shape == (50,)
    assert_same(fut.result(), tree)


class Trickle(io.RawIOBase):
    """A seekable raw object whose readinto gives at most 7 bytes at a time, and fails on
    demand."""

    def __init__(self, data):
        self.data, self.pos, self.fail = data, 0, False

    def readable(self):
        return True

    def seekable(self):
        return True

    def seek(self, pos, whence=0):
        self.pos = pos if whence == 0 else len(self.data) + pos if whence == 2 else self.pos + pos
        return self.pos

    def tell(self):
        return self.pos

    def readinto(self, b):
        if self.fail:
            raise OSError("the disk is on fire")
        n = min(7, len(b), len(self.data) - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def test_short_reads_are_repeated_and_read_errors_name_the_object():
    tree = {"w": np.arange(3000.0), "s": "text"}
    f = Trickle(jtree.dumps(tree, compression=None))
    with jtree.open(f) as lazy:
        assert_same(lazy.load(), tree)
        f.fail = True
        with pytest.raises(jtree.StorageError, match="<Trickle>.*the disk is on fire"):
            lazy["w"][10:20]


def test_many_threads_share_one_file_object():
    w = np.arange(1 << 18, dtype=np.float64).reshape(512, 512)
    f = io.BytesIO(jtree.dumps({"w": w}, chunk_bytes=16 << 10))
    errors = []
    with jtree.open(f) as lazy:
        def work(k):
            try:
                for i in range(20):
                    r = (k * 37 + i * 11) % 500
                    assert_same(lazy["w"][r:r + 9, r % 100:], w[r:r + 9, r % 100:])
                assert_same(lazy.load(threads=4)["w"], w)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[0]
