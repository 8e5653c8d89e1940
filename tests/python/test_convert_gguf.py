"""`jtree convert` for GGUF (python/jtree/convert/_from_gguf.py, _to_gguf.py, _gguf_parse.py).

Files are written by the gguf package's own GGUFWriter (quantized tensors by gguf.quants, or raw
blocks of any type) and compared with its GGUFReader: every tensor's bytes, GGML type and shape,
every key-value with its GGUF type. GGUF -> jtree -> GGUF gives back the same bytes. Hostile
files (huge counts, offsets past the end, truncations, overlaps...) give a clear error naming
the file, quickly, and leave no output; a fuzz loop mutates valid files and allows only
jtree errors out of the parser.
"""
import os
import random
import struct
import time

import numpy as np
import pytest

import jtree
from conftest import require

gguf = require("gguf")
ml_dtypes = require("ml_dtypes")

from gguf import GGMLQuantizationType as Q  # noqa: E402
from gguf import GGUFValueType as V  # noqa: E402
from gguf import GGUFWriter  # noqa: E402

from jtree.convert import _from_gguf, _gguf_parse, _to_gguf  # noqa: E402


def _write_model(path, alignment=None, n_vocab=300, **writer_kw):
    """A small GGUF with every kind of key-value and tensor GGUFWriter can write (a split set
    with ``split_max_tensors=``...)."""
    rng = np.random.default_rng(0)
    w = GGUFWriter(path, arch="llama", **writer_kw)
    if alignment:
        w.add_custom_alignment(alignment)
    w.add_name("tiny model")
    w.add_uint32("llama.context_length", 4096)
    w.add_float32("llama.rope.freq_base", 10000.5)
    w.add_bool("x.flag", True)
    for vt, v in [(V.UINT8, 200), (V.INT8, -3), (V.UINT16, 60000), (V.INT16, -30000),
                  (V.INT32, -2 ** 31), (V.UINT64, 2 ** 63 + 5), (V.INT64, -2 ** 62),
                  (V.FLOAT64, 1 / 3), (V.FLOAT32, float(np.float32(0.1)))]:
        w.add_key_value(f"x.{vt.name.lower()}", v, vt)
    w.add_key_value("x.not_utf8", b"\xff\xfe tok", V.STRING)
    w.add_token_list(["<s>", "</s>", "h\u00e9", "a b", ""] + [f"t{i}" for i in range(n_vocab)])
    w.add_token_scores([float(i) / 7 for i in range(n_vocab + 5)])
    w.add_token_types([1] * (n_vocab + 5))
    for vt in (V.UINT8, V.INT8, V.UINT16, V.INT16, V.UINT32, V.UINT64, V.INT64, V.FLOAT64):
        w.add_key_value(f"x.arr_{vt.name.lower()}", [1, 2, 3], vt.ARRAY, sub_type=vt)
    w.add_key_value("x.arr_bool", [True, False, True], V.ARRAY, sub_type=V.BOOL)
    x = rng.standard_normal((8, 256)).astype(np.float32)
    w.add_tensor("token_embd.weight", x)
    w.add_tensor("f16", rng.standard_normal((3, 5)).astype(np.float16))
    w.add_tensor("f64", rng.standard_normal((2, 3)))
    w.add_tensor("bf16", gguf.quants.quantize(x, Q.BF16), raw_dtype=Q.BF16)
    for q in (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.TQ2_0, Q.MXFP4):
        w.add_tensor(f"blk.0.{q.name.lower()}.weight", gguf.quants.quantize(x, q), raw_dtype=q)
    # K-quants and IQ types have no NumPy quantizer: raw blocks of random bytes are valid
    # files all the same (a converter only moves the blocks).
    for q in (Q.Q4_K, Q.Q6_K, Q.IQ2_XS):
        block, size = gguf.GGML_QUANT_SIZES[q]
        w.add_tensor(f"blk.1.{q.name.lower()}.weight",
                     rng.integers(0, 256, (4, 512 // block * size), dtype=np.uint8), raw_dtype=q)
    for dt in (np.int8, np.int16, np.int32, np.int64):
        w.add_tensor(f"{np.dtype(dt).name}", np.arange(7, dtype=dt) - 3)
    w.add_tensor("scalar", np.array(2.5, np.float32).reshape(()))
    w.add_tensor("empty", np.zeros((0, 4), np.float32))
    w.add_tensor("3d", rng.standard_normal((2, 3, 4)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture
def model(tmp_path):
    return _write_model(str(tmp_path / "model.gguf"))


def _bytes(a):
    return np.ascontiguousarray(np.asarray(a)).reshape(-1).view(np.uint8).tobytes()


@pytest.mark.parametrize("alignment", [None, 64])
def test_gguf_jtree_gguf_is_byte_identical(tmp_path, alignment):
    src = _write_model(str(tmp_path / "a.gguf"), alignment=alignment)
    mid, back = str(tmp_path / "a.jtree"), str(tmp_path / "b.gguf")
    st = jtree.convert(src, mid, verify=True)
    assert (st.src_format, st.dst_format, st.verified) == ("gguf", "jtree", True)
    st = jtree.convert(mid, back, verify=True)
    assert (st.src_format, st.dst_format, st.verified) == ("jtree", "gguf", True)
    with open(src, "rb") as f1, open(back, "rb") as f2:
        a, b = f1.read(), f2.read()
    assert len(a) == len(b) and a == b
    # Also without compression, and straight through the writer function.
    jtree.convert(src, mid, compression=None)
    with jtree.open(mid) as f:
        _to_gguf.write(f, str(tmp_path / "c.gguf"))
    with open(tmp_path / "c.gguf", "rb") as f3:
        assert f3.read() == a


def test_gguf_tree_matches_gguf_reader(model, tmp_path):
    dst = str(tmp_path / "m.jtree")
    jtree.convert(model, dst)
    tree = jtree.load(dst)
    assert list(tree) == ["tensors", "tensor_types", "metadata", "metadata_types"]
    with jtree.open(dst) as f:
        assert f.metadata["gguf.version"] == "3"
    r = gguf.GGUFReader(model)
    assert list(tree["tensors"]) == [t.name for t in r.tensors]
    for t in r.tensors:
        got = tree["tensors"][t.name]
        assert tree["tensor_types"][t.name] == t.tensor_type.name
        logical = tuple(reversed([int(d) for d in t.shape]))  # GGUF lists ne[0] first
        if t.tensor_type.name in ("F32", "F16", "F64", "I8", "I16", "I32", "I64"):
            assert got.dtype == t.data.dtype and got.shape == logical
        elif t.tensor_type == Q.BF16:
            assert got.dtype == ml_dtypes.bfloat16 and got.shape == logical
        else:  # raw blocks: uint8 rows, the shape GGUFReader gives them
            assert got.dtype == np.uint8 and got.shape == t.data.shape
            assert got.shape == gguf.quants.quant_shape_to_byte_shape(logical, t.tensor_type)
        n = int(np.prod(got.shape)) * got.dtype.itemsize
        raw = np.asarray(r.data[t.data_offset:t.data_offset + n])
        assert _bytes(got) == raw.tobytes(), t.name
    # Quantized rows dequantize like the original's.
    q8 = tree["tensors"]["blk.0.q8_0.weight"]
    orig = np.random.default_rng(0).standard_normal((8, 256)).astype(np.float32)
    np.testing.assert_array_equal(gguf.quants.dequantize(q8, Q.Q8_0),
                                  gguf.quants.dequantize(gguf.quants.quantize(orig, Q.Q8_0),
                                                         Q.Q8_0))
    # Every key-value, with its GGUF type.
    meta, types = tree["metadata"], tree["metadata_types"]
    assert list(meta) == [k for k in r.fields if not k.startswith("GGUF.")]
    for key, field in r.fields.items():
        if key.startswith("GGUF."):
            continue
        t0 = field.types[0].name
        want_type = t0 if t0 != "ARRAY" else f"ARRAY[{field.types[-1].name}]"
        assert types[key] == want_type, key
        if key == "x.not_utf8":
            assert meta[key] == b"\xff\xfe tok"
            continue
        want = field.contents()
        got = meta[key]
        if isinstance(got, np.ndarray):
            assert got.dtype == field.parts[field.data[0]].dtype.newbyteorder("=")
            got = got.tolist()
        assert got == want, key
    assert meta["tokenizer.ggml.tokens"][:5] == ["<s>", "</s>", "h\u00e9", "a b", ""]
    assert meta["tokenizer.ggml.scores"].dtype == np.float32


def test_gguf_slice_of_quantized_rows(model, tmp_path):
    dst = str(tmp_path / "m.jtree")
    jtree.convert(model, dst)
    full = jtree.load(dst)["tensors"]["blk.0.q4_0.weight"]
    with jtree.open(dst) as f:
        np.testing.assert_array_equal(f["tensors"]["blk.0.q4_0.weight"][2:5], full[2:5])


def _raw_kv(key, vtype, payload):
    k = key.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<I", vtype) + payload


def _raw_str(s):
    return struct.pack("<Q", len(s)) + s


def _raw_gguf(kvs, tensors, data=b"", alignment=32, version=3, n_kv=None, n_t=None):
    """A GGUF assembled byte by byte (for what GGUFWriter refuses to write)."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors) if n_t is None else n_t,
                                len(kvs) if n_kv is None else n_kv)
    out += b"".join(kvs)
    for name, ne, gtype, off in tensors:
        out += _raw_str(name.encode()) + struct.pack(f"<I{len(ne)}QIQ", len(ne), *ne, gtype, off)
    out += b"\0" * (-len(out) % alignment)
    return out + data


def test_gguf_what_gguf_writer_cannot_write_round_trips(tmp_path):
    # Keys in an order GGUFWriter would not use, an empty array, arrays of arrays, a string
    # array with a non-UTF-8 entry.
    arr_of_arr = struct.pack("<IQ", 9, 2) + struct.pack("<IQ", 5, 2) + struct.pack("<ii", 1, -1) \
        + struct.pack("<IQ", 8, 1) + _raw_str(b"x")
    kvs = [
        _raw_kv("b.first", 4, struct.pack("<I", 7)),
        _raw_kv("general.architecture", 8, _raw_str(b"test")),
        _raw_kv("e.empty", 9, struct.pack("<IQ", 8, 0)),
        _raw_kv("e.empty_f32", 9, struct.pack("<IQ", 6, 0)),
        _raw_kv("n.nested", 9, arr_of_arr),
        _raw_kv("s.mixed", 9, struct.pack("<IQ", 8, 2) + _raw_str(b"ok") + _raw_str(b"\xc3")),
    ]
    data = np.arange(8, dtype=np.float32).tobytes()
    src = tmp_path / "odd.gguf"
    src.write_bytes(_raw_gguf(kvs, [("w", (8,), 0, 0)], data))
    mid, back = str(tmp_path / "odd.jtree"), str(tmp_path / "back.gguf")
    jtree.convert(str(src), mid)
    tree = jtree.load(mid)
    assert list(tree["metadata"]) == ["b.first", "general.architecture", "e.empty",
                                      "e.empty_f32", "n.nested", "s.mixed"]
    assert tree["metadata"]["e.empty"] == [] and tree["metadata_types"]["e.empty"] == \
        "ARRAY[STRING]"
    assert tree["metadata"]["e.empty_f32"].dtype == np.float32
    assert tree["metadata_types"]["n.nested"] == "ARRAY[ARRAY]"
    assert tree["metadata"]["s.mixed"] == ["ok", b"\xc3"]
    jtree.convert(mid, back, verify=True)
    # Written by hand the same way GGUFWriter would: the same bytes.
    assert open(back, "rb").read() == src.read_bytes()


def test_jtree_without_gguf_layout_is_refused(tmp_path):
    p = str(tmp_path / "plain.jtree")
    jtree.save({"w": np.zeros(3, np.float32)}, p)
    dst = tmp_path / "out.gguf"
    with pytest.raises(jtree.InvalidArgumentError, match="plain.jtree.*converted from GGUF"):
        jtree.convert(p, str(dst))
    assert not dst.exists()
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_failed_write_keeps_existing_dst(model, tmp_path):
    tree = _from_gguf.open_source(model).tree
    tree["tensor_types"]["f16"] = "Q4_0"  # float16 data under a block type: refused
    p = str(tmp_path / "bad.jtree")
    jtree.save(tree, p)
    dst = tmp_path / "out.gguf"
    dst.write_bytes(b"previous")
    with pytest.raises(jtree.InvalidArgumentError, match="f16"):
        jtree.convert(p, str(dst))
    assert dst.read_bytes() == b"previous"
    assert sorted(os.listdir(tmp_path)) == ["bad.jtree", "model.gguf", "out.gguf"]


# ---- hostile and damaged files -----------------------------------------------------------------

def _expect_error(tmp_path, data, match=None, cls=jtree.Error):
    tmp_path = tmp_path / "hostile"  # a directory of its own: only bad.gguf may be in it
    tmp_path.mkdir(exist_ok=True)
    src = tmp_path / "bad.gguf"
    src.write_bytes(data)
    dst = tmp_path / "bad.jtree"
    t0 = time.monotonic()
    with pytest.raises(cls, match=match) as e:
        jtree.convert(str(src), str(dst), from_format="gguf")
    assert time.monotonic() - t0 < 5
    assert str(src) in str(e.value)
    assert not dst.exists()
    assert sorted(os.listdir(tmp_path)) == ["bad.gguf"]
    return e.value


def test_huge_counts(tmp_path):
    f32 = [("w", (8,), 0, 0)]
    data = np.zeros(8, np.float32).tobytes()
    _expect_error(tmp_path, _raw_gguf([], f32, data, n_t=2 ** 62), "tensors cannot fit",
                  jtree.CorruptionError)
    _expect_error(tmp_path, _raw_gguf([], f32, data, n_kv=2 ** 63), "key-values cannot fit",
                  jtree.CorruptionError)
    # An array of 2**60 strings (GGUFReader would loop over every one of them).
    kv = _raw_kv("tok", 9, struct.pack("<IQ", 8, 2 ** 60))
    _expect_error(tmp_path, _raw_gguf([kv], f32, data), "cannot fit", jtree.CorruptionError)
    kv = _raw_kv("scores", 9, struct.pack("<IQ", 6, 2 ** 61))
    _expect_error(tmp_path, _raw_gguf([kv], f32, data), "truncated", jtree.CorruptionError)
    kv = _raw_kv("k", 8, struct.pack("<Q", 2 ** 63))
    _expect_error(tmp_path, _raw_gguf([kv], f32, data), "truncated", jtree.CorruptionError)
    # A tensor of 2**60 elements, and dimensions whose product overflows 64 bits.
    _expect_error(tmp_path, _raw_gguf([], [("w", (2 ** 60,), 0, 0)], data), "past the end",
                  jtree.CorruptionError)
    _expect_error(tmp_path, _raw_gguf([], [("w", (2 ** 40, 2 ** 40), 0, 0)], data),
                  "overflow 64 bits", jtree.CorruptionError)
    _expect_error(tmp_path, _raw_gguf([], [("w", (0, 2 ** 63), 0, 0)], data),
                  "below 2", jtree.CorruptionError)
    _expect_error(tmp_path, _raw_gguf([], [("w", (0, 2 ** 62), 0, 0)], data),
                  "overflow 64 bits", jtree.CorruptionError)


def test_bad_tensor_infos(tmp_path):
    data = np.zeros(64, np.float32).tobytes()
    C = jtree.CorruptionError
    _expect_error(tmp_path, _raw_gguf([], [("w", (8,), 0, 4096)], data), "past the end", C)
    _expect_error(tmp_path, _raw_gguf([], [("w", (8,), 0, 4)], data), "alignment", C)
    _expect_error(tmp_path, _raw_gguf([], [("a", (16,), 0, 0), ("b", (8,), 0, 32)], data),
                  "overlaps", C)
    _expect_error(tmp_path, _raw_gguf([], [("a", (8,), 0, 0), ("a", (8,), 0, 32)], data),
                  "duplicate", C)
    _expect_error(tmp_path, _raw_gguf([], [("w", (1, 1, 1, 1, 1), 0, 0)], data),
                  "dimensions", C)
    _expect_error(tmp_path, _raw_gguf([], [("w", (16,), 2, 0)], data), "block size", C)
    _expect_error(tmp_path, _raw_gguf([], [("w", (8,), 99, 0)], data), "GGML type 99",
                  jtree.NotSupportedError)
    kvs = [_raw_kv("general.alignment", 4, struct.pack("<I", 24))]
    _expect_error(tmp_path, _raw_gguf(kvs, [], b""), "power of two", C)
    kvs = [_raw_kv("general.alignment", 5, struct.pack("<i", 32))]
    _expect_error(tmp_path, _raw_gguf(kvs, [], b""), "not UINT32", C)
    kvs = [_raw_kv("k", 4, struct.pack("<I", 1))] * 2
    _expect_error(tmp_path, _raw_gguf(kvs, [], b""), "duplicate key", C)
    kvs = [_raw_kv("k", 13, b"\0" * 8)]
    _expect_error(tmp_path, _raw_gguf(kvs, [], b""), "unknown value type", C)
    kvs = [_raw_kv("k", 7, b"\x05")]
    _expect_error(tmp_path, _raw_gguf(kvs, [], b""), "bool", C)
    deep = struct.pack("<IQ", 9, 1) * 20 + struct.pack("<IQ", 4, 0)
    _expect_error(tmp_path, _raw_gguf([_raw_kv("k", 9, deep)], [], b""), "nested", C)
    bad_name = b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + _raw_str(b"\xff") + b"\0" * 40
    _expect_error(tmp_path, bad_name, "not UTF-8", C)


def test_unsupported_variants(tmp_path):
    data = np.zeros(8, np.float32).tobytes()
    good = _raw_gguf([], [("w", (8,), 0, 0)], data)
    _expect_error(tmp_path, good[:4] + struct.pack("<I", 1) + good[8:], "version 1",
                  jtree.NotSupportedError)
    _expect_error(tmp_path, good[:4] + struct.pack(">I", 3) + good[8:], "big-endian",
                  jtree.NotSupportedError)
    _expect_error(tmp_path, b"GGUX" + good[4:], "magic", jtree.CorruptionError)
    _expect_error(tmp_path, b"", "empty", jtree.CorruptionError)


def test_every_truncation(model, tmp_path):
    data = open(model, "rb").read()
    r = _gguf_parse.parse(data, "m")
    cuts = sorted(set(list(range(0, 200, 7)) + [r.data_offset - 1, r.data_offset,
                                                len(data) - 1]
                      + list(range(200, r.data_offset, 97))))
    for n in cuts:
        e = _expect_error(tmp_path, data[:n], cls=jtree.CorruptionError)
        assert "GGUF" in str(e)


def test_fuzz_mutated_gguf(model, tmp_path):
    """Mutates a valid file many times (bytes flipped, counts and lengths overwritten with
    extremes, cuts): the parser and reader either succeed (every leaf then readable) or raise
    a jtree.Error; nothing else, and no call takes long."""
    data = bytearray(open(model, "rb").read())
    rng = random.Random(1234)
    header_end = _gguf_parse.parse(bytes(data), "m").data_offset
    extremes = [0, 1, 2 ** 31, 2 ** 32 - 1, 2 ** 63, 2 ** 64 - 1, 0x7FFFFFFF]
    p = str(tmp_path / "f.gguf")
    n_ok = n_err = 0
    for i in range(int(os.environ.get("JTREE_GGUF_FUZZ_N", "600"))):
        d = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            pos = rng.randrange(0, min(header_end, len(d) or 1))
            if not d:
                break
            if op < 0.5:
                d[pos] = rng.randrange(256)
            elif op < 0.8:
                v = rng.choice(extremes)
                d[pos:pos + 8] = struct.pack("<Q", v % 2 ** 64)
            elif op < 0.9:
                d = d[:rng.randrange(0, len(d))]
            else:
                d[pos:pos + 4] = struct.pack("<I", rng.randrange(0, 14))
        with open(p, "wb") as f:
            f.write(d)
        t0 = time.monotonic()
        try:
            s = _from_gguf.open_source(p)
            try:
                for leaf in s.tree["tensors"].values():
                    a = leaf.fetch() if hasattr(leaf, "fetch") else leaf
                    _bytes(a)
            finally:
                s.close()
            n_ok += 1
        except jtree.Error as e:
            assert p in str(e)
            n_err += 1
        assert time.monotonic() - t0 < 5, f"mutation {i} took too long"
    assert n_ok > 0 and n_err > 0


def test_sniff(model, tmp_path):
    assert _from_gguf.sniff(model)
    assert not _from_gguf.sniff(str(tmp_path / "missing.gguf"))
    other = tmp_path / "x.gguf"
    other.write_bytes(b"PK\3\4")
    assert not _from_gguf.sniff(str(other))


def test_atheris_harness_replays_its_seeds(tmp_path):
    """fuzz/python/fuzz_convert_gguf.py (the atheris harness) makes its seed corpus and
    replays it, plus a damaged seed, without atheris."""
    import subprocess
    import sys
    harness = os.path.join(os.path.dirname(__file__), "..", "..", "fuzz", "python",
                           "fuzz_convert_gguf.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(jtree.__file__))] + sys.path))
    corpus = str(tmp_path / "corpus")
    subprocess.run([sys.executable, harness, "--make-corpus", corpus], check=True, env=env,
                   timeout=300)
    seeds = sorted(os.listdir(corpus))
    assert len(seeds) == 4
    data = open(os.path.join(corpus, seeds[0]), "rb").read()
    with open(os.path.join(corpus, "cut"), "wb") as f:
        f.write(data[:len(data) // 3])
    r = subprocess.run([sys.executable, harness, "--replay", corpus], env=env, timeout=300,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "replayed 5 inputs: 0 failed" in r.stdout


def test_gguf_v2_comes_back_as_v3(model, tmp_path):
    """GGUF v2 has v3's layout (v3 added big-endian files): it converts, and comes back
    as the file GGUFWriter writes, version 3."""
    data = bytearray(open(model, "rb").read())
    data[4:8] = struct.pack("<I", 2)
    src = tmp_path / "v2.gguf"
    src.write_bytes(bytes(data))
    mid, back = str(tmp_path / "v2.jtree"), str(tmp_path / "back.gguf")
    jtree.convert(str(src), mid)
    with jtree.open(mid) as f:
        assert f.metadata["gguf.version"] == "2"
    jtree.convert(mid, back, verify=True)
    assert open(back, "rb").read() == open(model, "rb").read()


@pytest.mark.parametrize("change,match", [
    (lambda t: t["metadata"].__setitem__("x.uint8", 300), "metadata/x.uint8"),
    (lambda t: t["metadata"].__setitem__("llama.rope.freq_base", "text"),
     "metadata/llama.rope.freq_base"),
    (lambda t: t["metadata_types"].__setitem__("x.flag", "NOPE"), "metadata_types/x.flag"),
    (lambda t: t["tensors"].__setitem__("f16", "not an array"), "tensors/f16"),
    (lambda t: t["tensor_types"].__setitem__("f16", "Q99"), "tensor_types/f16"),
    (lambda t: t["tensors"].__setitem__("blk.0.q8_0.weight", np.zeros((2, 33), np.uint8)),
     "blk.0.q8_0.weight"),
    (lambda t: t["metadata"].pop("x.flag"), "different keys"),
])
def test_bad_gguf_layout_values(model, tmp_path, change, match):
    """A .jtree file whose GGUF layout was edited wrongly: an error naming the key, no output."""
    s = _from_gguf.open_source(model)
    tree = {k: dict(v) for k, v in s.tree.items()}
    tree["tensors"] = {k: (v.fetch() if hasattr(v, "fetch") else v)
                       for k, v in tree["tensors"].items()}
    s.close()
    change(tree)
    p = str(tmp_path / "edited.jtree")
    jtree.save(tree, p)
    dst = tmp_path / "out.gguf"
    with pytest.raises(jtree.Error, match=match):
        jtree.convert(p, str(dst))
    assert sorted(os.listdir(tmp_path)) == ["edited.jtree", "model.gguf"]


# ---- split GGUF sets (model-00001-of-0000N.gguf ...) --------------------------------------------

from jtree.convert import _gguf_split  # noqa: E402


def _open_fds():
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


def _write_split(d, **writer_kw):
    """The _write_model model written by GGUFWriter as a split set in directory ``d``; its shard
    paths in order."""
    d.mkdir(exist_ok=True)
    _write_model(str(d / "model.gguf"), **writer_kw)
    shards = sorted(str(d / n) for n in os.listdir(d))
    assert len(shards) > 2 and all(n.endswith(f"-of-{len(shards):05d}.gguf") for n in shards)
    return shards


def test_split_constants_are_gguf_py_s():
    from gguf.gguf_writer import SHARD_NAME_FORMAT
    assert _gguf_split.KEYS == (gguf.Keys.Split.LLM_KV_SPLIT_NO,
                                gguf.Keys.Split.LLM_KV_SPLIT_COUNT,
                                gguf.Keys.Split.LLM_KV_SPLIT_TENSORS_COUNT)
    assert _gguf_split.NAME_FORMAT.format("m", 2, 3) == SHARD_NAME_FORMAT.format("m", 2, 3)


@pytest.mark.parametrize("which", [0, 1, -1])
def test_split_gguf_converts_as_one_model(tmp_path, which):
    """Any shard of a set GGUFWriter split converts the whole set: the tree holds every
    shard's tensors in order (the bytes GGUFReader finds in each shard), the first shard's
    key-values without split.*, and converting it back writes one GGUF, byte for byte the file
    GGUFWriter writes unsplit for the same tensors and key-values."""
    shards = _write_split(tmp_path / "split", split_max_tensors=5)
    single = _write_model(str(tmp_path / "single.gguf"))
    mid, back = str(tmp_path / "m.jtree"), str(tmp_path / "back.gguf")
    fds = _open_fds()
    st = jtree.convert(shards[which], mid, verify=True)
    assert st.verified and f"split in {len(shards)} shards" in st.description
    assert _open_fds() == fds  # every shard's fd closed
    tree = jtree.load(mid)
    with jtree.open(mid) as f:
        assert f.metadata["gguf.split_count"] == str(len(shards))
        assert f.metadata["gguf.version"] == "3"
    assert not [k for k in tree["metadata"] if k.startswith("split.")]
    assert list(tree["metadata"]) == list(tree["metadata_types"])
    # Tensor by tensor against GGUFReader of each shard, in shard order.
    names = []
    for path in shards:
        r = gguf.GGUFReader(path)
        for t in r.tensors:
            names.append(t.name)
            got = tree["tensors"][t.name]
            assert tree["tensor_types"][t.name] == t.tensor_type.name
            n = int(np.prod(got.shape)) * got.dtype.itemsize
            assert _bytes(got) == np.asarray(r.data[t.data_offset:t.data_offset + n]).tobytes()
    assert list(tree["tensors"]) == names == list(tree["tensor_types"])
    # The key-values are the unsplit file's, with their types, in its order.
    r = gguf.GGUFReader(single)
    assert list(tree["metadata"]) == [k for k in r.fields if not k.startswith("GGUF.")]
    st = jtree.convert(mid, back, verify=True)
    assert st.verified
    with open(back, "rb") as f1, open(single, "rb") as f2:
        assert f1.read() == f2.read()


def test_split_gguf_with_a_first_shard_of_key_values_only(tmp_path):
    """GGUFWriter(small_first_shard=True): the first shard holds the key-values and no tensor."""
    shards = _write_split(tmp_path / "split", split_max_tensors=8, small_first_shard=True)
    assert gguf.GGUFReader(shards[0]).tensors == []
    single = _write_model(str(tmp_path / "single.gguf"))
    mid, back = str(tmp_path / "m.jtree"), str(tmp_path / "back.gguf")
    jtree.convert(shards[1], mid, verify=True)
    jtree.convert(mid, back, verify=True)
    assert open(back, "rb").read() == open(single, "rb").read()
    # Straight GGUF -> GGUF too (through a temporary .jtree file).
    jtree.convert(shards[0], str(tmp_path / "direct.gguf"))
    assert open(tmp_path / "direct.gguf", "rb").read() == open(single, "rb").read()


def _split_kvs(no, count, total, types=(2, 2, 5)):
    fmt = {2: "<H", 4: "<I", 5: "<i", 6: "<f"}
    return [_raw_kv(k, t, struct.pack(fmt[t], v))
            for k, t, v in zip(_gguf_split.KEYS, types, (no, count, total))]


def _raw_shard(path, no, count, total, names, extra_kvs=(), n=8):
    """A shard written byte by byte: float32 tensors of ``n`` elements under ``names``, the
    i-th all i, aligned to 32."""
    tensors = [(name, (n,), 0, 4 * n * i) for i, name in enumerate(names)]
    data = b"".join(np.full(n, i, np.float32).tobytes() for i in range(len(names)))
    path.write_bytes(_raw_gguf(list(extra_kvs) + _split_kvs(no, count, total), tensors, data))
    return str(path)


def test_split_gguf_set_of_one_and_extra_key_values(tmp_path):
    # split.count 1 (gguf-split into one file) or 0 (gguf-split --merge leaves that in the
    # merged file): one whole model, as llama.cpp reads it, whatever its name and its other
    # split keys; it converts as it is and comes back byte for byte.
    mid, back = str(tmp_path / "lone.jtree"), str(tmp_path / "back.gguf")
    for count, no in ((1, 0), (0, 0), (0, 7)):
        lone = _raw_shard(tmp_path / "lone.gguf", no, count, 2, ["a", "b"],
                          [_raw_kv("general.architecture", 8, _raw_str(b"x"))])
        jtree.convert(lone, mid)
        t = jtree.load(mid)
        assert list(t["metadata"]) == ["general.architecture", "split.no", "split.count",
                                       "split.tensors.count"]
        assert t["metadata"]["split.count"] == count and list(t["tensors"]) == ["a", "b"]
        with jtree.open(mid) as f:
            assert "gguf.split_count" not in f.metadata
        jtree.convert(mid, back, verify=True)
        assert open(back, "rb").read() == open(lone, "rb").read()
    # A key a later shard repeats with the same value is kept once; one only a later shard
    # has is added after the first shard's; a later shard's general.alignment is its own.
    d = tmp_path / "set"
    d.mkdir()
    arch = _raw_kv("general.architecture", 8, _raw_str(b"x"))
    _raw_shard(d / "m-00001-of-00002.gguf", 0, 2, 3, ["a"], [arch])
    _raw_shard(d / "m-00002-of-00002.gguf", 1, 2, 3, ["b", "c"],
               [_raw_kv("general.alignment", 4, struct.pack("<I", 32)), arch,
                _raw_kv("z.extra", 4, struct.pack("<I", 9))])
    jtree.convert(str(d / "m-00002-of-00002.gguf"), mid)
    t = jtree.load(mid)
    assert t["metadata"] == {"general.architecture": "x", "z.extra": 9}
    assert t["metadata_types"] == {"general.architecture": "STRING", "z.extra": "UINT32"}
    assert list(t["tensors"]) == ["a", "b", "c"]
    np.testing.assert_array_equal(t["tensors"]["c"], np.full(8, 1, np.float32))


def _patch_kv(path, key, fmt, value):
    """Overwrites the value of the scalar key-value ``key`` in the GGUF file ``path``."""
    data = bytearray(open(path, "rb").read())
    pos = data.index(_raw_str(key.encode())) + 8 + len(key) + 4
    struct.pack_into(fmt, data, pos, value)
    open(path, "wb").write(bytes(data))


def _expect_set_error(tmp_path, src, bad, match, cls=jtree.CorruptionError):
    """Converting ``src`` fails with ``cls`` naming the file ``bad``; the existing destination is
    kept, nothing else appears beside it, and no file descriptor is left open."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    dst = out / "m.jtree"
    dst.write_bytes(b"previous")
    fds = _open_fds()
    with pytest.raises(cls, match=match) as e:
        jtree.convert(src, str(dst))
    assert str(bad) in str(e.value)
    assert dst.read_bytes() == b"previous" and os.listdir(out) == ["m.jtree"]
    assert _open_fds() == fds
    # The same through the GGUF -> GGUF path, and with no destination yet: nothing written.
    dst.unlink()
    with pytest.raises(cls, match=match):
        jtree.convert(src, str(out / "m.gguf"))
    assert os.listdir(out) == []
    return e.value


def test_split_gguf_missing_shard(tmp_path):
    shards = _write_split(tmp_path / "split", split_max_tensors=5)
    os.unlink(shards[2])
    e = _expect_set_error(tmp_path, shards[0], shards[2], r"shard 3 of \d+ of the set .*"
                                                          r"model-\*-of-\d{5}\.gguf is missing")
    assert e.file == shards[2]
    # From another shard too; two missing are counted.
    os.unlink(shards[-1])
    _expect_set_error(tmp_path, shards[1], shards[2], r"2 of \d+ shards are missing")


def test_split_gguf_inconsistent_sets(tmp_path):
    d = tmp_path / "split"

    def fresh():
        for n in os.listdir(d) if d.exists() else ():
            os.unlink(d / n)
        return _write_split(d, split_max_tensors=5)

    s = fresh()
    _patch_kv(s[1], "split.count", "<H", len(s) + 1)
    _expect_set_error(tmp_path, s[0], s[1], rf"split.count is {len(s) + 1}, but .*says {len(s)}")
    # Given the shard whose split.count disagrees with its name.
    _expect_set_error(tmp_path, s[1], s[1], rf"the name says shard 2 of {len(s)}, the "
                                            rf"key-values shard 2 of {len(s) + 1}")
    s = fresh()
    _patch_kv(s[1], "split.tensors.count", "<i", 3)
    _expect_set_error(tmp_path, s[0], s[1], r"split.tensors.count is 3, but")
    s = fresh()
    for p in s:  # every shard agrees, but on a wrong total
        _patch_kv(p, "split.tensors.count", "<i", 99)
    _expect_set_error(tmp_path, s[2], s[0], r"split.tensors.count is 99, but the \d+ shards "
                                            r"of .*model-\*-of-\d+.gguf hold \d+ tensors")
    # Shards out of order: shard 2's file holds split.no 2 (renamed in place of each other).
    s = fresh()
    os.rename(s[1], str(d / "tmp"))
    os.rename(s[2], s[1])
    os.rename(str(d / "tmp"), s[2])
    _expect_set_error(tmp_path, s[0], s[1], r"split.no is 2, but this is shard 2 of .*out of "
                                            r"order")
    # A tensor in two shards.
    s = fresh()
    # (a name of the same length in a later shard renamed: the file's layout is unchanged)
    names = [[t.name for t in gguf.GGUFReader(p).tensors] for p in s]
    i, j, a, b = next((i, j, a, b) for i in range(len(s)) for j in range(i + 1, len(s))
                      for a in names[i] for b in names[j] if len(a) == len(b))
    data = open(s[j], "rb").read().replace(_raw_str(b.encode()), _raw_str(a.encode()), 1)
    open(s[j], "wb").write(data)
    _expect_set_error(tmp_path, s[0], s[j], rf"tensor '{a}' is also in .*{os.path.basename(s[i])}")
    # A shard that is not GGUF.
    s = fresh()
    open(s[1], "wb").write(b"PK\3\4 not a GGUF file at all")
    _expect_set_error(tmp_path, s[0], s[1], "not a GGUF file")
    # A shard without split keys (another model's file under the set's name).
    s = fresh()
    _write_model(s[1])
    _expect_set_error(tmp_path, s[0], s[1], r"shard 2 of \d+ by its name, but not a shard of "
                                            r"a set")


def test_split_gguf_bad_split_key_values(tmp_path):
    d = tmp_path / "raw"
    d.mkdir()
    p = d / "m-00001-of-00002.gguf"
    # A set's shard without split.no; a split key that is not an integer; out-of-range
    # values.
    p.write_bytes(_raw_gguf(_split_kvs(0, 2, 2)[1:], [], b""))
    _expect_set_error(tmp_path, str(p), p, "no 'split.no' key-value")
    p.write_bytes(_raw_gguf(_split_kvs(0, 2, 2, types=(2, 6, 5)), [], b""))
    _expect_set_error(tmp_path, str(p), p, "'split.count' has type FLOAT32")
    p.write_bytes(_raw_gguf(_split_kvs(0, -1, 2, types=(2, 5, 5)), [], b""))
    _expect_set_error(tmp_path, str(p), p, "split.count is -1")
    p.write_bytes(_raw_gguf(_split_kvs(2, 2, 2), [], b""))
    _expect_set_error(tmp_path, str(p), p, r"split.no is 2, not in \[0, 2\)")
    # More shards than the limit: refused before looking for any of them.
    p.write_bytes(_raw_gguf(_split_kvs(0, _gguf_split.MAX_SHARDS + 1, 2, types=(2, 4, 5)),
                            [], b""))
    _expect_set_error(tmp_path, str(p), p, f"a set has 2 to {_gguf_split.MAX_SHARDS} shards")
    # A shard renamed: the others cannot be found.
    q = d / "renamed.gguf"
    _raw_shard(q, 1, 3, 3, ["a"])
    _expect_set_error(tmp_path, str(q), q, r"shard 2 of 3 .*cannot be found")
    # A key two shards hold with different values.
    arch = _raw_kv("general.architecture", 8, _raw_str(b"x"))
    _raw_shard(d / "m-00001-of-00002.gguf", 0, 2, 2, ["a"], [arch])
    other = _raw_shard(d / "m-00002-of-00002.gguf", 1, 2, 2, ["b"],
                       [_raw_kv("general.architecture", 8, _raw_str(b"y"))])
    _expect_set_error(tmp_path, str(p), other, "'general.architecture' .*differs from the one "
                                               "in .*m-00001-of-00002.gguf")


def test_split_shard_alone_round_trips(tmp_path):
    """A tree holding a shard's own split.* key-values (one shard read alone, as jtree did
    before it read sets) writes that shard back byte for byte, and --verify reads the written
    file alone rather than as a set."""
    shards = _write_split(tmp_path / "split", split_max_tensors=5)
    s = _from_gguf.open_file(shards[1])
    try:
        assert "split.no" in s.tree["metadata"]
        mid = str(tmp_path / "shard.jtree")
        jtree.save(s.tree, mid)
    finally:
        s.close()
    out = str(tmp_path / "out" / "shard.gguf")
    os.mkdir(os.path.dirname(out))
    st = jtree.convert(mid, out, verify=True)
    assert st.verified
    assert open(out, "rb").read() == open(shards[1], "rb").read()


def test_split_gguf_cli(tmp_path, capsys):
    from jtree.convert import _cli
    assert "split" in _cli.parser().format_help()
    shards = _write_split(tmp_path / "split", split_max_tensors=5)
    assert _cli.run([shards[-1], str(tmp_path / "m.jtree")]) == 0
    assert f"split in {len(shards)} shards" in capsys.readouterr().err
    os.unlink(shards[0])
    assert _cli.run([shards[-1], str(tmp_path / "n.jtree"), "-q"]) == 1
    err = capsys.readouterr().err
    assert shards[0] in err and "is missing" in err
    assert not (tmp_path / "n.jtree").exists()


def test_split_gguf_custom_alignment(tmp_path):
    """gguf-py's GGUFWriter writes every shard at the first shard's general.alignment but puts
    the key in the first shard only; llama.cpp's gguf-split writes later shards at GGUF's
    default 32. Both read right: by GGUF's rule a later shard is at 32, unless only the first
    shard's alignment lays it out to the file's size."""
    shards = _write_split(tmp_path / "split", alignment=256, split_max_tensors=5)
    # The later shards lack the key, and GGUFReader reads them at 32, from the wrong bytes.
    assert gguf.GGUFReader(shards[1]).alignment == 32
    single = _write_model(str(tmp_path / "single.gguf"), alignment=256)
    for which in (0, 2):
        mid, back = str(tmp_path / "m.jtree"), str(tmp_path / "back.gguf")
        jtree.convert(shards[which], mid, verify=True)
        jtree.convert(mid, back, verify=True)
        assert open(back, "rb").read() == open(single, "rb").read()
    # llama.cpp's layout: the first shard at 64, the second (no key) at 32; its tensors
    # (64 bytes each) would fit a layout at 64 too, but that one would not end at its size.
    d = tmp_path / "llama"
    d.mkdir()
    align = _raw_kv("general.alignment", 4, struct.pack("<I", 64))
    kvs = [align] + _split_kvs(0, 2, 3)
    (d / "m-00001-of-00002.gguf").write_bytes(
        _raw_gguf(kvs, [("a", (8,), 0, 0)], np.full(8, 7, np.float32).tobytes(), alignment=64))
    names = ["b", "c"]
    second = None
    for pad_key in range(64):  # a header size where 32 and 64 place the data differently
        extra = [_raw_kv("p" * (pad_key + 1), 4, struct.pack("<I", 0))]
        second = _raw_shard(d / "m-00002-of-00002.gguf", 1, 2, 3, names, extra, n=16)
        hdr = _gguf_parse.parse(open(second, "rb").read(), second)
        if hdr.data_offset % 64:
            break
    assert hdr.data_offset % 64
    jtree.convert(second, str(d / "m.jtree"), verify=True)
    t = jtree.load(str(d / "m.jtree"))
    np.testing.assert_array_equal(t["tensors"]["a"], np.full(8, 7, np.float32))
    np.testing.assert_array_equal(t["tensors"]["b"], np.full(16, 0, np.float32))
    np.testing.assert_array_equal(t["tensors"]["c"], np.full(16, 1, np.float32))
    assert t["metadata"]["general.alignment"] == 64
    # With bytes after the last tensor that fit neither layout's end, GGUF's rule (32) stands.
    with open(second, "ab") as f:
        f.write(b"\xff" * 64)
    jtree.convert(second, str(d / "m.jtree"), verify=True)
    t = jtree.load(str(d / "m.jtree"))
    np.testing.assert_array_equal(t["tensors"]["c"], np.full(16, 1, np.float32))
