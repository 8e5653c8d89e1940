"""jtree convert on malformed and hostile inputs: every one is a jtree error naming the file
(CorruptionError for damaged bytes), never a crash, a hang or a huge allocation; nothing is
written and an existing destination is kept. Includes a mutation fuzz of safetensors files."""
import json
import os
import random
import struct
import zipfile

import numpy as np
import pytest

import jtree
from conftest import require
from convert_util import write_hf_sharded


def st_bytes(header, data=b""):
    """A safetensors file from a header object (or raw header bytes) and a data section."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + data


def entry(dtype="F32", shape=(2,), offsets=(0, 8)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


HOSTILE = {
    "overlap": st_bytes({"a": entry(offsets=(0, 8)), "b": entry(offsets=(4, 12))}, bytes(16)),
    "out_of_range": st_bytes({"a": entry(offsets=(8, 16))}, bytes(8)),
    "offset_past_file": st_bytes({"a": entry(shape=(1 << 40,), offsets=(0, 4 << 40))}, bytes(8)),
    "size_mismatch": st_bytes({"a": entry(shape=(3,), offsets=(0, 8))}, bytes(8)),
    "reversed_offsets": st_bytes({"a": entry(shape=(0,), offsets=(8, 0))}, bytes(8)),
    "negative_shape": st_bytes({"a": entry(shape=(-2,), offsets=(0, 8))}, bytes(8)),
    "float_shape": st_bytes({"a": entry(shape=(2.0,), offsets=(0, 8))}, bytes(8)),
    "many_dims": st_bytes({"a": entry(shape=(1,) * 1000, offsets=(0, 4))}, bytes(8)),
    "huge_header_len": struct.pack("<Q", 1 << 62) + b"{}",
    "header_past_end": struct.pack("<Q", 1000) + b"{}",
    "bad_json": st_bytes(b'{"a": {"dtype": "F32", '),
    "not_utf8": st_bytes(b'{"\xff": 1}'),
    "json_array": st_bytes([1, 2]),
    "deep_json": st_bytes(b"[" * 100000 + b"]" * 100000),
    "duplicate_key": st_bytes(b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, '
                              b'"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}',
                              bytes(16)),
    "metadata_not_strings": st_bytes({"__metadata__": {"k": 1}}),
    "entry_not_object": st_bytes({"a": 3}),
    "short": b"\x01\x00",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_safetensors(tmp_path, case):
    src = tmp_path / "bad.safetensors"
    src.write_bytes(HOSTILE[case])
    dst = tmp_path / "out.jtree"
    with pytest.raises(jtree.CorruptionError) as e:
        jtree.convert(str(src), str(dst))
    assert str(src) in str(e.value)
    assert os.listdir(tmp_path) == ["bad.safetensors"]  # nothing written, no temp file


def test_unknown_dtype_is_not_supported(tmp_path):
    src = tmp_path / "x.safetensors"
    src.write_bytes(st_bytes({"a": entry(dtype="Q4_K")}, bytes(8)))
    with pytest.raises(jtree.NotSupportedError, match="Q4_K"):
        jtree.convert(str(src), str(tmp_path / "o.jtree"))


def test_existing_destination_kept(tmp_path):
    good = tmp_path / "good.safetensors"
    good.write_bytes(st_bytes({"a": entry()}, np.arange(2, dtype=np.float32).tobytes()))
    dst = tmp_path / "out.jtree"
    jtree.convert(str(good), str(dst))
    before = dst.read_bytes()
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(HOSTILE["overlap"])
    with pytest.raises(jtree.CorruptionError):
        jtree.convert(str(bad), str(dst))
    assert dst.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["bad.safetensors", "good.safetensors", "out.jtree"]


@pytest.fixture
def sharded(tmp_path):
    torch = require("torch")
    ts = {f"layer.{i}.w": torch.full((4, 4), float(i)) for i in range(6)}
    index = write_hf_sharded(str(tmp_path / "ckpt"), ts, 3)
    return index


def _shard(index, i=1):
    d = os.path.dirname(index)
    return os.path.join(d, sorted(n for n in os.listdir(d) if n.endswith(".safetensors"))[i])


def _fails(index, tmp_path, match, cls=jtree.CorruptionError):
    dst = tmp_path / "out.jtree"
    with pytest.raises(cls, match=match) as e:
        jtree.convert(index, str(dst))
    assert not dst.exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith("out.jtree")]
    return e.value


def test_truncated_shard(sharded, tmp_path):
    shard = _shard(sharded)
    with open(shard, "r+b") as f:
        f.truncate(os.path.getsize(shard) - 10)
    e = _fails(sharded, tmp_path, "outside the data section")
    assert shard in str(e)


def test_missing_shard(sharded, tmp_path):
    shard = _shard(sharded, 2)
    os.unlink(shard)
    e = _fails(sharded, tmp_path, "missing")
    assert os.path.basename(shard) in str(e) and sharded in str(e)


def test_index_bad_json_and_shapes(sharded, tmp_path):
    with open(sharded, "w") as f:
        f.write('{"weight_map": {"a": ')
    _fails(sharded, tmp_path, "not valid JSON")
    with open(sharded, "w") as f:
        json.dump({"metadata": {}}, f)
    _fails(sharded, tmp_path, "weight_map")


def test_index_escaping_paths_refused(sharded, tmp_path):
    for bad in ["../outside.safetensors", "/etc/passwd", ".."]:
        with open(sharded, "w") as f:
            json.dump({"weight_map": {"a": bad}}, f)
        _fails(sharded, tmp_path, "not a file name beside the index")


def test_index_and_shards_disagree(sharded, tmp_path):
    index = json.load(open(sharded))
    name = next(iter(index["weight_map"]))
    index["weight_map"]["ghost.weight"] = index["weight_map"][name]
    json.dump(index, open(sharded, "w"))
    _fails(sharded, tmp_path, "lack them")
    del index["weight_map"]["ghost.weight"]
    index["weight_map"][name] = _shard(sharded, 2).rsplit("/", 1)[1]
    json.dump(index, open(sharded, "w"))
    _fails(sharded, tmp_path, "maps to")


def test_fuzz_safetensors(tmp_path):
    """Random mutations of a valid file (header bytes, lengths, data) give a jtree.Error or a
    correct conversion, nothing else, each quickly."""
    rng = random.Random(1234)
    header = {"__metadata__": {"format": "pt"},
              "a": entry("F32", (2, 3), (0, 24)), "b": entry("BF16", (4,), (24, 32)),
              "c": entry("I64", (1,), (32, 40))}
    base = st_bytes(header, bytes(range(40)))
    src, dst = tmp_path / "f.safetensors", tmp_path / "f.jtree"
    outcomes = {"ok": 0, "error": 0}
    for i in range(400):
        data = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            pos = rng.randrange(len(data))
            if op < 0.5:
                data[pos] = rng.randrange(256)
            elif op < 0.7:
                data[pos:pos] = bytes([rng.randrange(256)])
            elif op < 0.85:
                del data[pos:pos + rng.randint(1, 8)]
            else:
                # a digit of the header changed: offsets and shapes are where bugs hide
                digits = [j for j in range(8, len(data)) if chr(data[j]).isdigit()]
                if digits:
                    data[rng.choice(digits)] = ord(str(rng.randrange(10)))
        src.write_bytes(bytes(data))
        try:
            jtree.convert(str(src), str(dst), from_format="safetensors", verify=True)
            outcomes["ok"] += 1
        except jtree.Error:
            outcomes["error"] += 1
    assert outcomes["error"] > 100 and outcomes["ok"] > 10, outcomes


def test_corrupt_numpy_and_torch(tmp_path):
    npz = tmp_path / "a.npz"
    np.savez(npz, a=np.arange(1000), b=np.ones(10))
    data = bytearray(npz.read_bytes())
    # cut the archive: the central directory is gone
    (tmp_path / "cut.npz").write_bytes(bytes(data[: len(data) // 2]))
    with pytest.raises(jtree.Error) as e:
        jtree.convert(str(tmp_path / "cut.npz"), str(tmp_path / "o.jtree"), from_format="numpy")
    assert "cut.npz" in str(e.value)
    npy = tmp_path / "a.npy"
    np.save(npy, np.arange(1000))
    (tmp_path / "t.npy").write_bytes(npy.read_bytes()[:-100])
    with pytest.raises(jtree.CorruptionError, match="truncated"):
        jtree.convert(str(tmp_path / "t.npy"), str(tmp_path / "o.jtree"))
    # a member whose header claims 8 TB: refused from the sizes, before any allocation
    import io  # noqa: PLC0415

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f8", "fortran_order": False, "shape": (10 ** 12,)})
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("x.npy", "w", force_zip64=True) as m:
            m.write(buf.getvalue())
    with pytest.raises(jtree.CorruptionError, match="its header says"):
        jtree.convert(str(tmp_path / "bomb.npz"), str(tmp_path / "o.jtree"))
    torch = require("torch")
    pt = tmp_path / "m.pt"
    torch.save({"w": torch.ones(100)}, pt)
    raw_pt = pt.read_bytes()
    (tmp_path / "cut.pt").write_bytes(raw_pt[: len(raw_pt) // 2])
    with pytest.raises(jtree.Error) as e:
        jtree.convert(str(tmp_path / "cut.pt"), str(tmp_path / "o.jtree"), from_format="torch")
    assert "cut.pt" in str(e.value)
    assert not (tmp_path / "o.jtree").exists()


def _mutations(base, rng, n):
    for _ in range(n):
        data = bytearray(base)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(data))
            op = rng.random()
            if op < 0.6:
                data[pos] = rng.randrange(256)
            elif op < 0.8:
                del data[pos:pos + rng.randint(1, 16)]
            else:
                data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        yield bytes(data)


@pytest.mark.parametrize("kind", ["npz", "npz_compressed", "npy", "torch"])
def test_fuzz_numpy_and_torch(tmp_path, kind):
    """Random mutations of .npz/.npy/.pt files: a jtree.Error or a conversion, nothing else."""
    path = tmp_path / "in.bin"
    arrays = {"a": np.arange(300, dtype=np.float32), "b": np.ones((4, 5), np.int16)}
    if kind == "npz":
        np.savez(path.open("wb"), **arrays)
    elif kind == "npz_compressed":
        np.savez_compressed(path.open("wb"), **arrays)
    elif kind == "npy":
        np.save(path.open("wb"), arrays["a"])
    else:
        torch = require("torch")
        torch.save({k: torch.from_numpy(v) for k, v in arrays.items()}, str(path))
    base = path.read_bytes()
    fmt = "torch" if kind == "torch" else "numpy"
    rng = random.Random(99)
    dst = tmp_path / "out.jtree"
    errors = 0
    for data in _mutations(base, rng, 150):
        path.write_bytes(data)
        try:
            jtree.convert(str(path), str(dst), from_format=fmt)
        except jtree.Error:
            errors += 1
    assert errors > 20


def _harness():
    """fuzz/python/fuzz_convert_safetensors.py imported as its --replay mode does (no atheris)."""
    import importlib.util  # noqa: PLC0415
    import sys  # noqa: PLC0415

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "fuzz", "python", "fuzz_convert_safetensors.py")
    argv, sys.argv = sys.argv, [path, "--replay"]
    try:
        spec = importlib.util.spec_from_file_location("jtree_fuzz_convert_safetensors", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv = argv
    return mod


def test_fuzz_harness_seeds_and_mutations(tmp_path):
    """The atheris harness's entry point (open, read every tensor, round trip through jtree and
    back to safetensors, compare) on its seeds and 300 mutations of them: only jtree errors."""
    require("torch")
    h = _harness()
    corpus = tmp_path / "corpus"
    h.make_corpus(str(corpus))
    seeds = sorted(corpus.iterdir())
    assert len(seeds) == 3
    assert h.replay([str(corpus)]) == 0
    rng = random.Random(7)
    for seed in seeds:
        for data in _mutations(seed.read_bytes(), rng, 100):
            h.test_one_input(data)
