"""Save then load: every leaf type, every dtype and memory layout, randomized nested trees."""
import collections
import math
import random

import numpy as np
import pytest

import jtree
from conftest import assert_same, require

ml_dtypes = require("ml_dtypes")

ALL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
              "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
              "float8_e8m0fnu", "float4_e2m1fn", "int4", "uint4",
              # format version 2
              "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float6_e2m3fn",
              "float6_e3m2fn"]
VERSION_2_DTYPES = ["float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "float6_e2m3fn",
                    "float6_e3m2fn"]


def np_dtype(name):
    return np.dtype(getattr(ml_dtypes, name)) if not hasattr(np, name) or name == "bool" and False \
        else np.dtype(name) if name in np.sctypeDict else np.dtype(getattr(ml_dtypes, name))


def random_array(rng, name, shape):
    """Random elements of any dtype, built from valid bit patterns (finite for floats)."""
    dt = np_dtype(name)
    n = math.prod(shape)
    if name == "bool":
        return rng.integers(0, 2, n).astype(bool).reshape(shape)
    if name in ("int4", "uint4"):
        lo, hi = (-8, 8) if name == "int4" else (0, 16)
        return rng.integers(lo, hi, n).astype(dt).reshape(shape)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, n, dtype=dt, endpoint=True).reshape(shape)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt).reshape(shape)
    return (rng.standard_normal(n) * 3).astype(dt).reshape(shape)


def test_the_dtype_table_matches_numpy_and_ml_dtypes():
    # The library's names are NumPy's and ml_dtypes' names, with the same element sizes.
    from jtree import _dtypes
    assert sorted(_dtypes.TABLE) == sorted(ALL_DTYPES)
    for name, (_code, item, bits) in _dtypes.TABLE.items():
        assert np_dtype(name).itemsize == item, name
        assert bits == (4 if name in ("int4", "uint4", "float4_e2m1fn") else 8 * item), name


@pytest.mark.parametrize("name", ALL_DTYPES)
def test_every_dtype_and_shape(path, name):
    rng = np.random.default_rng(abs(hash(name)) % 1000)
    shapes = [(), (0,), (1,), (7,), (1000,), (33, 17), (4, 0, 3), (5, 6, 7), (3000, 5)]
    tree = {f"s{i}": random_array(rng, name, s) for i, s in enumerate(shapes)}
    tree["scalar"] = random_array(rng, name, ())[()]
    jtree.save(tree, path, chunk_bytes=4096)  # small chunks: many of them
    out = jtree.load(path)
    assert_same(tree, out)
    assert type(out["scalar"]) is type(tree["scalar"])  # a NumPy scalar, not a 0-d array
    spec = jtree.load_pytreedef(path)
    assert spec["s5"].dtype == np_dtype(name) and spec["s5"].shape == (33, 17)
    assert spec["scalar"].scalar and not spec["s0"].scalar


@pytest.mark.parametrize("name", VERSION_2_DTYPES)
def test_version_2_dtypes_every_bit_pattern(path, name):
    # Every bit pattern ml_dtypes can hold (6-bit types: the low 6 bits), inline and chunked,
    # raw and compressed, comes back with the same bytes and ml_dtypes' dtype; a file holding
    # one needs a version-2 reader (min_read_version 2), one without keeps version 1.
    dt = np.dtype(getattr(ml_dtypes, name))
    assert dt.itemsize == 1
    patterns = np.arange(64 if name.startswith("float6") else 256, dtype=np.uint8)
    a = patterns.view(dt)
    big = np.tile(patterns, 500).view(dt).reshape(250, -1)
    tree = {"a": a, "big": big, "big_t": big.T, "scalar": a[5]}
    for compression in (None, "zstd"):
        jtree.save(tree, path, compression=compression, chunk_bytes=4096, inline_threshold=16)
        out = jtree.load(path)
        assert_same(tree, out)
        assert np.array_equal(out["big"].view(np.uint8), np.tile(patterns, 500).reshape(250, -1))
        # Values as ml_dtypes reads them (NaN where it has NaN).
        np.testing.assert_array_equal(out["a"].astype(np.float64), a.astype(np.float64))
        with jtree.open(path) as f:
            info = f.info()
            assert info["writer_version"] == jtree._jtree.FORMAT_VERSION == 3
            assert info["min_read_version"] == 2
            assert np.array_equal(f["big"][3:7, 10:20].view(np.uint8),
                                  big[3:7, 10:20].view(np.uint8))
    jtree.save({"x": np.arange(10, dtype=np.float32)}, path)
    with jtree.open(path) as f:
        assert f.info()["min_read_version"] == 1  # version-1 readers still read it


@pytest.mark.parametrize("name", VERSION_2_DTYPES)
def test_version_2_dtypes_as_torch(path, torch, name):
    # PyTorch has none of them: cast= to a torch type converts through ml_dtypes; without it
    # the error names the leaf and the way out.
    a = np.arange(-6, 6, dtype=np.float32).astype(getattr(ml_dtypes, name))
    jtree.save({"a": a}, path)
    t = jtree.load(path, framework="torch", cast=torch.float32)["a"]
    assert t.dtype == torch.float32 and np.array_equal(t.numpy(), a.astype(np.float32))
    with pytest.raises(jtree.NotSupportedError, match=f"PyTorch has no dtype for {name}"):
        jtree.load(path, framework="torch")


def test_memory_orders_strides_and_byte_orders(path):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((40, 30, 20))
    cases = {
        "fortran": np.asfortranarray(base),
        "transposed": base.transpose(2, 0, 1),
        "negative": base[::-1, :, ::-2],
        "stepped": base[1:39:3, ::4, 5:6],
        "broadcast": np.broadcast_to(np.arange(5.0), (4, 5)),
        "big_endian_f8": base.astype(">f8"),
        "big_endian_i4_strided": np.arange(1000, dtype=">i4").reshape(10, 100)[:, ::3],
        "big_endian_c16": (base[0] + 1j).astype(">c16"),
        "big_endian_u2": np.arange(7, dtype=">u2"),
        "readonly": np.frombuffer(bytes(range(64)), np.uint8).reshape(8, 8),
        "bf16_transposed": base[0].astype(ml_dtypes.bfloat16).T,
        "int4_strided": rng.integers(-8, 8, (9, 9)).astype(ml_dtypes.int4)[::2, 1::3],
        "unaligned": np.frombuffer(b"\0" + np.arange(10.0).tobytes(), np.float64, 10, 1),
    }
    jtree.save(cases, path, chunk_bytes=1024)
    out = jtree.load(path)
    for k, v in cases.items():
        expect = np.ascontiguousarray(v).astype(v.dtype.newbyteorder("="))
        assert out[k].dtype == expect.dtype, k
        assert out[k].dtype.isnative and out[k].flags.c_contiguous, k
        np.testing.assert_array_equal(out[k], expect, err_msg=k)


def test_python_scalars_keep_their_types_and_values(path):
    tree = [0, -1, 2**63 - 1, -2**63, 2**63, -2**63 - 1, 2**200 + 12345, -(3**150), 10**400,
            True, False, 0.0, -0.0, 1e-310, float("inf"), float("-inf"), float("nan"), 1.5,
            complex(1, -2), complex(float("nan"), float("inf")), "", "héllo wörld ✓ 😀",
            "a" * 100000, b"", b"\x00\xff" * 50000, bytearray(b"mutable"), None]
    jtree.save(tree, path)
    out = jtree.load(path)
    assert_same(tree, out)
    assert math.copysign(1, out[12]) == -1.0  # -0.0 kept
    assert type(out[25]) is bytearray


def test_numpy_scalars_of_every_kind(path):
    tree = [np.float32(1.5), np.int8(-3), np.uint64(2**64 - 1), np.bool_(True),
            np.complex64(1 - 2j), ml_dtypes.bfloat16(2.5), np.float64("nan")]
    jtree.save(tree, path)
    out = jtree.load(path)
    assert_same(tree, out)
    assert [type(x) for x in out] == [type(x) for x in tree]


def test_containers_and_keys(path):
    Point = collections.namedtuple("Point", ["x", "y"])
    tree = {
        "": 1, "a/b": 2, "back\\slash": 3, "ünï": 4, 7: "int key", -(2**63): "min key",
        "empty": [{}, [], (), collections.OrderedDict()],
        "nested": [[[[1]]]],
        "nt": Point(np.arange(3), Point(1, None)),
        "od": collections.OrderedDict([("z", 1), ("a", 2)]),
        "none": None,
    }
    jtree.save(tree, path)
    out = jtree.load(path)
    assert_same(tree, out)
    assert list(out) == list(tree)
    # Key paths escape '/' and '\' the way the library does.
    with jtree.open(path) as f:
        assert f.at("a\\/b") == 2 and f.at("back\\\\slash") == 3 and f.at("nt/y/x") == 1
        assert f._reader.path(f._root.children[1].index) == "a\\/b"


def test_tied_arrays_are_stored_once_and_restored_shared(path):
    w = np.random.default_rng(3).standard_normal((256, 256))
    tree = {"enc": {"emb": w}, "dec": {"emb": w}, "view": w[:], "other": w.copy()}
    stats = jtree.save(tree, path, compression=None)
    out = jtree.load(path)
    assert out["enc"]["emb"] is out["dec"]["emb"] is out["view"]  # same memory, same view
    assert out["other"] is not out["enc"]["emb"]
    np.testing.assert_array_equal(out["other"], w)
    assert stats.leaves == 2 and stats.raw_bytes == 2 * w.nbytes


def test_ties_of_ml_dtypes_and_big_endian_views(path):
    # Ties are found by address, shape, strides and dtype: also for the dtypes that export
    # no buffer (ml_dtypes) and for big-endian arrays, and never between different views or
    # dtypes of the same memory.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    w = np.arange(64, dtype=np.float32).reshape(8, 8)
    b = w.astype(ml_dtypes.bfloat16)
    be = w.astype(">f4")
    tree = {"b": b, "b_view": b[:], "b_cols": b[:, ::2], "b_u16": b.view(np.uint16),
            "be": be, "be_view": be.view(), "le": be.astype("<f4"), "w": w}
    stats = jtree.save(tree, path, compression=None)
    out = jtree.load(path)
    assert out["b"] is out["b_view"] and out["be"] is out["be_view"]
    assert len({id(out[k]) for k in ("b", "b_cols", "b_u16", "be", "le", "w")}) == 6
    assert stats.leaves == 6
    for k, v in tree.items():
        np.testing.assert_array_equal(out[k], v)
        assert out[k].dtype == v.dtype.newbyteorder("=")


def random_tree(rng, depth=0):
    """A random nested tree and nothing else (exercises structure, keys and leaf kinds)."""
    r = rng.random()
    if depth >= 5 or r < 0.35:
        return random_leaf(rng)
    n = rng.randrange(0, 5)
    kind = rng.choice(["dict", "list", "tuple", "od", "nt"])
    children = [random_tree(rng, depth + 1) for _ in range(n)]
    if kind == "dict":
        keys = list(dict.fromkeys(rng.choice(["a", "b/c", "ключ", "", "x\\y", 0, -5, 2**40])
                                  for _ in range(n)))
        return dict(zip(keys, children))
    if kind == "od":
        return collections.OrderedDict((f"k{i}", c) for i, c in enumerate(children))
    if kind == "nt":
        return collections.namedtuple("NT", [f"f{i}" for i in range(n)])(*children)
    return children if kind == "list" else tuple(children)


def random_leaf(rng):
    npr = np.random.default_rng(rng.randrange(1 << 30))
    r = rng.randrange(9)
    if r == 0:
        return None
    if r == 1:
        return rng.choice([0, -7, 2**70, True, 3.25, float("inf"), 1 - 1j])
    if r == 2:
        return rng.choice(["", "text", "ü" * rng.randrange(10)])
    if r == 3:
        return rng.choice([b"", b"bytes", bytearray(b"ba")])
    name = rng.choice(ALL_DTYPES)
    shape = tuple(rng.randrange(0, 6) for _ in range(rng.randrange(0, 4)))
    a = random_array(npr, name, shape)
    if r == 4 and a.ndim > 1:
        a = a.T
    return a


@pytest.mark.parametrize("seed", range(40))
def test_randomized_nested_trees(tmp_path, seed):
    rng = random.Random(seed)
    tree = random_tree(rng)
    p = str(tmp_path / f"r{seed}.jtree")
    jtree.save(tree, p, chunk_bytes=rng.choice([64, 1024, 1 << 20]),
               compression=rng.choice(["zstd", None]))
    out = jtree.load(p)
    # Namedtuple classes are made by the loader: compare by name and fields (assert_same).
    assert_same(tree, out)


def test_int4_layout_is_ml_dtypes_layout(path):
    # In memory one element per byte, the value in the low nibble: ml_dtypes' layout, so arrays
    # are handed over as their bytes. ml_dtypes writes the high nibble of int4 as 0 and reads
    # only the low nibble; jtree's loads give exactly those bytes (no sign extension), and a
    # saved array whose int4 bytes are sign-extended stores the same nibbles. Stored packed two
    # per byte, element 2j in the low nibble.
    vals = np.arange(-8, 8)
    a = vals.astype(ml_dtypes.int4)
    assert np.array_equal(a.view(np.uint8), vals & 0xF)  # ml_dtypes: low nibble, high 0
    assert np.array_equal(np.array(vals.astype(np.int8)).view(ml_dtypes.int4), a)  # sign-ext. ok
    u = np.arange(16).astype(ml_dtypes.uint4)
    assert np.array_equal(u.view(np.uint8), np.arange(16))
    f4 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -6], ml_dtypes.float4_e2m1fn)
    big = np.tile(vals, 1000).astype(ml_dtypes.int4)  # chunked, raw: its bytes are checkable
    jtree.save({"i4": a, "u4": u, "f4": f4, "big": big}, path, compression=None,
               inline_threshold=64)
    out = jtree.load(path)
    assert out["i4"].dtype == ml_dtypes.int4
    assert np.array_equal(out["i4"], a) and np.array_equal(out["i4"].astype(np.int64), vals)
    assert out["i4"].tobytes() == a.tobytes()  # ml_dtypes' bytes: low nibble, high 0
    assert np.array_equal(out["u4"].view(np.uint8), np.arange(16))
    assert np.array_equal(out["f4"].view(np.uint8), f4.view(np.uint8))
    assert out["big"].tobytes() == big.tobytes()
    with jtree.open(path) as f:
        leaf = f["big"]._leaf.index
        chunks = f._reader.chunks(leaf)
        assert len(chunks) == 1
        offset, size, raw = chunks[0]
    assert size == raw == 8000
    with open(path, "rb") as fh:
        fh.seek(offset)
        stored = np.frombuffer(fh.read(size), np.uint8)
    nib = np.tile(vals, 1000).astype(np.int64) & 0xF
    assert np.array_equal(stored, (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8))


@pytest.mark.parametrize("storage", ["inline", "raw", "zstd"])
def test_int4_uint4_load_holds_ml_dtypes_bytes(tmp_path, storage):
    # Issue 20 defect 5: a load gave [248 251 255 0 1 7] for int4 [-8 -5 -1 0 1 7] (sign-extended)
    # where ml_dtypes holds [8 11 15 0 1 7]. Whole loads, lazy slices (starting on a high nibble,
    # crossing chunks, strided) and sign-extended input must all come back as ml_dtypes' bytes.
    vals = np.array([-8, -5, -1, 0, 1, 7] * 40 + [3])  # odd: a pad nibble
    i4 = vals.astype(ml_dtypes.int4)
    u4 = (vals & 0xF).astype(ml_dtypes.uint4)
    i4_2d = np.arange(-8, 8).repeat(7)[:99].reshape(9, 11).astype(ml_dtypes.int4)
    assert i4[:6].tobytes() == bytes([8, 11, 15, 0, 1, 7])  # ml_dtypes' own bytes
    sign_extended = vals.astype(np.int8).view(ml_dtypes.int4)  # same values, other bytes
    assert np.array_equal(sign_extended, i4) and sign_extended.tobytes() != i4.tobytes()
    tree = {"i4": i4, "u4": u4, "i4_2d": i4_2d, "from_sign_extended": sign_extended}
    p = str(tmp_path / f"{storage}.jtree")
    kw = {"inline_threshold": 1 << 20} if storage == "inline" else {
        "inline_threshold": 0, "chunk_bytes": 16,
        "compression": "zstd" if storage == "zstd" else None}
    jtree.save(tree, p, **kw)
    out = jtree.load(p)
    for k in tree:
        assert out[k].dtype == tree[k].dtype and out[k].shape == tree[k].shape, k
        assert out[k].tobytes() == tree[k if k != "from_sign_extended" else "i4"].tobytes(), k
    with jtree.open(p) as f:
        assert (len(f._reader.chunks(f["i4"]._leaf.index)) == 0) == (storage == "inline")
        for k, idx in [("i4", slice(3, 200)), ("u4", slice(1, 240, 7)), ("i4", 5),
                       ("i4_2d", (slice(2, 8), slice(1, 10, 3))), ("i4_2d", (4, slice(None)))]:
            want = np.asarray(tree[k][idx])
            got = np.asarray(f[k][idx])
            assert got.dtype == want.dtype and got.shape == want.shape, (k, idx)
            assert got.tobytes() == want.tobytes(), (k, idx)


def test_torch_tensors_of_every_dtype(path, torch):
    names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
             "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
             "float8_e8m0fnu"]
    g = torch.Generator().manual_seed(0)
    tree = {}
    for n in names:
        t = getattr(torch, n)
        base = torch.randn(6, 10, generator=g) * 3
        if n == "bool":
            x = base > 0
        elif n.startswith("int") or n.startswith("uint"):
            x = base.to(torch.int64).to(t)
        elif n.startswith("complex"):
            x = torch.complex(base, -base).to(t)
        elif n == "float8_e8m0fnu":
            x = base.abs().add(0.5).to(t)
        else:
            x = base.to(t)
        tree[n] = x
        tree[n + "_t"] = x.t()  # non-contiguous
    tree["param"] = torch.nn.Parameter(torch.ones(3))  # requires grad
    tree["conj"] = torch.tensor([1 + 2j, 3 - 4j]).conj()
    jtree.save(tree, path, chunk_bytes=64)
    back = jtree.load(path, framework="torch")
    for k, x in tree.items():
        y = back[k]
        assert isinstance(y, torch.Tensor) and y.dtype == x.dtype and y.shape == x.shape, k
        assert torch.equal(y.view(torch.uint8) if y.dtype == torch.bool else
                           y.contiguous().view(torch.uint8),
                           x.detach().resolve_conj().contiguous().view(torch.uint8)), k
    # As NumPy: bf16 and float8 through ml_dtypes, bit-exact.
    as_np = jtree.load(path)
    assert as_np["bfloat16"].dtype == ml_dtypes.bfloat16
    assert np.array_equal(as_np["bfloat16"].view(np.uint16),
                          tree["bfloat16"].view(torch.int16).numpy().view(np.uint16))
    assert as_np["float8_e5m2"].dtype == ml_dtypes.float8_e5m2
    np.testing.assert_array_equal(as_np["conj"], np.array([1 - 2j, 3 + 4j], np.complex64))


def test_version_2_dtypes_with_jax(path, jax):
    # JAX's own float8 types (float8_e4m3b11fnuz is JAX's default for some TPU work) save and
    # load bit-exact; a type the JAX backend cannot hold (XLA's CPU client has no float6) is a
    # jtree error naming the leaf, not XLA's exception.
    tree = {}
    for name in VERSION_2_DTYPES:
        x = np.arange(-8, 8, dtype=np.float32).astype(getattr(ml_dtypes, name))
        try:
            tree[name] = jax.device_put(x)
        except Exception:  # noqa: BLE001  (the backend lacks it: saved from NumPy instead)
            tree[name] = x
    assert all(isinstance(tree[n], jax.Array) for n in VERSION_2_DTYPES[:3])
    jtree.save(tree, path)
    back = jtree.load(path)
    for name, x in tree.items():
        assert back[name].dtype == np.dtype(getattr(ml_dtypes, name))
        assert np.array_equal(back[name].view(np.uint8), np.asarray(x).view(np.uint8)), name
    held = {n for n, x in tree.items() if isinstance(x, jax.Array)}
    for name in VERSION_2_DTYPES:
        if name in held:
            y = jtree.load(path, framework="jax", keys=[name])[name]
            assert isinstance(y, jax.Array) and y.dtype == tree[name].dtype
            assert np.array_equal(np.asarray(y).view(np.uint8), np.asarray(tree[name]).view(np.uint8))
        else:
            with pytest.raises(jtree.NotSupportedError, match=name):
                jtree.load(path, framework="jax", keys=[name])


def test_jax_arrays_single_device(path, jax):
    jnp = jax.numpy
    tree = {"f": jnp.arange(12.0).reshape(3, 4), "bf": jnp.ones((5,), jnp.bfloat16),
            "i8": jnp.arange(-4, 4, dtype=jnp.int8), "s": jnp.float32(3)}
    jtree.save(tree, path)
    out = jtree.load(path)
    for k, v in tree.items():
        assert out[k].dtype == v.dtype and np.array_equal(np.asarray(out[k]), np.asarray(v)), k
    back = jtree.load(path, framework="jax")
    assert all(isinstance(v, jax.Array) for v in back.values())


class DLPackOnly:
    """An array-like known to jtree only through the DLPack protocol."""

    def __init__(self, a):
        self._a = a
        self.shape = a.shape

    def __dlpack__(self, **kw):
        return self._a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_anything_with_dlpack(path):
    a = np.arange(24, dtype=np.int16).reshape(4, 6)[:, ::2]
    jtree.save({"x": DLPackOnly(a)}, path)
    out = jtree.load(path)["x"]
    assert out.dtype == np.int16 and np.array_equal(out, a)
    fut = jtree.nonblocking_save({"x": DLPackOnly(a)}, path)
    fut.result()
    assert np.array_equal(jtree.load(path)["x"], a)


def test_large_leaves_many_chunks_compressed(path):
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((1024, 1024)) * 0.02).astype(ml_dtypes.bfloat16)
    tree = {"w": w, "z": np.zeros((3000, 1000), np.float32)}
    stats = jtree.save(tree, path, chunk_bytes=256 << 10)
    assert stats.chunks >= 8 + 40
    assert stats.stored_bytes < 0.8 * stats.raw_bytes  # bf16 weights and zeros compress
    assert_same(tree, jtree.load(path))
    assert jtree.open(path).verify()["ok"]
