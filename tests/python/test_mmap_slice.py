"""Slices of a lazy array over the file's memory map (issue 17): with mmap on (the default) a
basic index of a leaf saved without compression, in a local file, comes back as a view of the
file's private copy-on-write map, checking only the chunks the slice overlaps. What a user
relies on: the values (any basic index, bf16, empty slices, negative steps), private writes,
the read-only option, lifetime past close(), a damaged chunk named when the slice overlaps it
and not read when it does not, and the fallbacks that still read into new memory."""
import gc
import io

import numpy as np
import pytest

import jtree
from conftest import require
from test_mmap import is_mapped


def tree():
    rng = np.random.default_rng(0)
    return {"w": rng.standard_normal((1000, 300)).astype(np.float32),  # 54 rows a chunk
            "i": rng.integers(0, 1000, (5000,), dtype=np.int64),
            "t": rng.integers(0, 100, (6, 50, 40), dtype=np.int16),
            "e": np.zeros((0, 4), np.float32)}


@pytest.fixture
def raw_file(path):
    t = tree()
    jtree.save(t, path, compression=None, chunk_bytes=64 * 1024)
    return path, t


INDICES = [np.s_[10:20], np.s_[5], np.s_[-1], np.s_[3:900:7, ::-2], np.s_[..., 5],
           np.s_[None, 3:5], np.s_[::-1], np.s_[250:7:-3, 1::3], np.s_[:, 299],
           np.s_[999:0:-100, -3:], np.s_[53:55]]  # (53:55 crosses a chunk boundary)


@pytest.mark.parametrize("index", INDICES, ids=[str(i) for i in range(len(INDICES))])
def test_any_basic_index_is_a_view_with_the_values(raw_file, index):
    path, t = raw_file
    with jtree.open(path) as f:
        part = f["w"][index]
    want = t["w"][index]
    assert is_mapped(part)
    assert part.dtype == want.dtype and part.shape == want.shape
    np.testing.assert_array_equal(part, want)


def test_views_of_3d_and_1d_leaves(raw_file):
    path, t = raw_file
    with jtree.open(path) as f:
        for key, index in [("t", np.s_[2:5, 10:40:3, ::-7]), ("t", np.s_[-1, :, 0]),
                           ("i", np.s_[4999:100:-13]), ("i", np.s_[123:4567])]:
            part = f[key][index]
            assert is_mapped(part)
            np.testing.assert_array_equal(part, t[key][index])


def test_bf16_slice_is_a_view(path):
    ml_dtypes = require("ml_dtypes")
    emb = np.random.default_rng(1).standard_normal((4096, 64)).astype(ml_dtypes.bfloat16)
    jtree.save({"emb": emb}, path, compression=None, chunk_bytes=32 * 1024)
    with jtree.open(path) as f:
        assert len(f._reader.chunks(f["emb"]._leaf.index)) == 16
        part = f["emb"][1000:2000]
        rev = f["emb"][2000:1000:-1, ::2]
    assert part.dtype == ml_dtypes.bfloat16 and is_mapped(part) and is_mapped(rev)
    np.testing.assert_array_equal(part.view(np.uint16), emb[1000:2000].view(np.uint16))
    np.testing.assert_array_equal(rev.view(np.uint16), emb[2000:1000:-1, ::2].view(np.uint16))


def test_empty_slices(raw_file):
    path, t = raw_file
    with jtree.open(path) as f:
        for key, index in [("w", np.s_[5:5]), ("w", np.s_[:, 3:3]), ("w", np.s_[20:10]),
                           ("w", np.s_[10:20:-1, 4]), ("e", np.s_[:]), ("e", np.s_[:, 1:3])]:
            part = f[key][index]
            assert part.shape == t[key][index].shape and part.dtype == t[key].dtype


def test_writes_change_the_view_never_the_file(raw_file):
    path, t = raw_file
    before = open(path, "rb").read()
    with jtree.open(path) as f:
        part = f["w"][100:200]
        part[:] = 7.0
        assert (part == 7.0).all()
        # Each slice maps its chunks anew: the write is in no other slice or loaded leaf, and
        # the chunks it changed still verify for the next slice (no false CorruptionError).
        again = f["w"][90:210]
        assert is_mapped(again)
        np.testing.assert_array_equal(again, t["w"][90:210])
        whole = f["w"].read()
        np.testing.assert_array_equal(whole, t["w"])
        whole[:] = 1.0
        np.testing.assert_array_equal(f["w"][150:250], t["w"][150:250])
        assert (part == 7.0).all()
    assert open(path, "rb").read() == before
    with jtree.open(path) as f:
        np.testing.assert_array_equal(f["w"][100:200], t["w"][100:200])
    np.testing.assert_array_equal(jtree.load(path)["w"], t["w"])


def test_read_only_option_gives_read_only_views(raw_file):
    path, t = raw_file
    with jtree.open(path, mmap="r") as f:
        part = f["w"][3:9, ::2]
        assert is_mapped(part) and not part.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            part[0, 0] = 1.0
        np.testing.assert_array_equal(part, t["w"][3:9, ::2])
    with jtree.open(path) as f:
        assert f["w"][3:9].flags.writeable


def test_view_outlives_close_and_the_file_object(raw_file):
    path, t = raw_file
    f = jtree.open(path)
    part = f["w"][500:600, 10:20]
    f.close()
    del f
    gc.collect()
    np.testing.assert_array_equal(part, t["w"][500:600, 10:20])
    part += 1  # still writable memory
    np.testing.assert_array_equal(part, t["w"][500:600, 10:20] + 1)


def damage_chunk(path, key, k):
    with jtree.open(path) as f:
        chunks = f._reader.chunks(f[key]._leaf.index)
    data = bytearray(open(path, "rb").read())
    data[chunks[k][0] + 11] ^= 0x40
    open(path, "wb").write(bytes(data))
    return chunks


def test_only_the_overlapped_chunks_are_checked(raw_file):
    path, t = raw_file
    chunks = damage_chunk(path, "w", 2)  # rows 108-161
    assert len(chunks) == 19
    with jtree.open(path) as f:
        before = f.io_stats()["bytes_read"]
        # Boxes outside chunk 2 verify (chunks 0-1, 3-18) and read nothing through the file.
        for index in [np.s_[0:108], np.s_[162:], np.s_[107, ::-1], np.s_[999:161:-1, 5]]:
            part = f["w"][index]
            assert is_mapped(part)
            np.testing.assert_array_equal(part, t["w"][index])
        assert f.io_stats()["bytes_read"] == before
        # Any box touching chunk 2 names it.
        for index in [np.s_[100:110], np.s_[161, 299], np.s_[500:0:-1]]:
            with pytest.raises(jtree.CorruptionError, match=r"leaf w: chunk 2: checksum mismatch"):
                f["w"][index]
    with jtree.open(path, verify=False) as f:  # what the file holds, damage included
        part = f["w"][100:170]
        assert is_mapped(part)
        assert not np.array_equal(part, t["w"][100:170])


def test_what_does_not_map_is_read_as_before(path, tmp_path):
    t = tree()
    t["z"] = np.arange(20000, dtype=np.int64)  # compresses: stored as zstd chunks
    jtree.save(t, path, chunk_bytes=64 * 1024)
    with jtree.open(path) as f:
        part = f["z"][100:5000:3]
        assert not is_mapped(part)
        np.testing.assert_array_equal(part, t["z"][100:5000:3])
    raw = str(tmp_path / "raw.jtree")
    jtree.save(t, raw, compression=None, chunk_bytes=64 * 1024)
    opened = [jtree.open(raw, mmap=False),
              jtree.open(io.BytesIO(open(raw, "rb").read()))]  # (a file object without a file)
    for f in opened:
        with f:
            part = f["w"][10:300:2, ::-1]
            assert not is_mapped(part) and part.flags.writeable
            np.testing.assert_array_equal(part, t["w"][10:300:2, ::-1])
    with open(raw, "rb") as fileobj, jtree.open(fileobj) as f:  # a local file's object maps
        part = f["w"][10:300:2, ::-1]
        assert is_mapped(part)
        np.testing.assert_array_equal(part, t["w"][10:300:2, ::-1])


def test_torch_slices_alias_the_map(raw_file):
    torch = require("torch")
    path, t = raw_file
    before = open(path, "rb").read()
    for mmap in (True, "r"):
        with jtree.open(path, framework="torch", mmap=mmap) as f:
            x = f["w"][40:60]
            assert isinstance(x, torch.Tensor)
            np.testing.assert_array_equal(x.numpy(), t["w"][40:60])
            # No copy: the tensor lies where the map puts row 40 within its page.
            row40 = f._reader.chunks(f["w"]._leaf.index)[0][0] + 40 * 300 * 4
            assert x.data_ptr() % 4096 == row40 % 4096
            x.fill_(3.0)  # copy-on-write, as whole torch leaves are
            assert (x == 3.0).all()
            np.testing.assert_array_equal(f["w"][40:60].numpy(), t["w"][40:60])  # its own
            r = f["w"][60:40:-1]  # torch cannot index backwards: a copy, right values
            np.testing.assert_array_equal(r.numpy(), t["w"][60:40:-1])
    assert open(path, "rb").read() == before
