"""Partial loads (masks, placeholders, key-path patterns) checked through the library's read
statistics; target trees with casts and pad/truncate; out= arrays filled in place."""
import dataclasses

import numpy as np
import pytest

import jtree
from conftest import assert_same, require

ml_dtypes = require("ml_dtypes")


def _rand(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.fixture
def ckpt(path):
    """A checkpoint whose arrays are incompressible and of distinct sizes (0.25 to 3 MiB)."""
    tree = {
        "params": {
            "layer0": {"kernel": _rand((512, 512), 1), "bias": _rand((65536,), 2)},
            "layer1": {"kernel": _rand((768, 512), 3), "bias": _rand((70000,), 4)},
        },
        "opt_state": [_rand((512, 1024), 5), _rand((512, 1536), 6)],
        "step": 101,
        "name": "run-7",
    }
    jtree.save(tree, path, compression=None)
    return path, tree


def _stored(f, key_path):
    """Bytes the file stores for a leaf (sum of its chunks)."""
    return sum(size for _off, size, _raw in f._reader.chunks(f.at(key_path)._leaf.index))


def _read_during(f, fn):
    """(fn(), bytes read, read requests) through f's counters. (Files opened with mmap=False:
    loads of raw leaves then go through pread, which the counters see; by default they are
    views of the file's memory map, tested in test_mmap.py.)"""
    before = f.io_stats()
    out = fn()
    after = f.io_stats()
    return out, after["bytes_read"] - before["bytes_read"], after["read_requests"] - before["read_requests"]


def test_structure_only_reads_no_chunk_data(ckpt):
    path, _ = ckpt
    with jtree.open(path) as f:
        opened = f.io_stats()["bytes_read"]
        spec, read, _ = _read_during(f, lambda: jtree.load_pytreedef(f))
        size = f.info()["file_size"]
    assert read == 0
    # Opening reads the head and the tail (64 KiB + 256 KiB by default: header, index, footer),
    # whatever the size of the data.
    assert opened <= (64 << 10) + (256 << 10) and opened < size / 10
    assert spec["params"]["layer1"]["kernel"].shape == (768, 512)


def test_mask_with_none_and_placeholders_reads_only_the_chosen_leaves(ckpt):
    path, tree = ckpt
    mask = {
        "params": {"layer0": {"kernel": None, "bias": ...}, "layer1": {"kernel": True, "bias": None}},
        "opt_state": [None, ...],
        "step": True,
        "name": None,
    }
    with jtree.open(path, mmap=False) as f:
        out, read, requests = _read_during(f, lambda: jtree.load(f, mask))
        want = _stored(f, "params/layer1/kernel")
    assert read == want  # exactly the chosen leaf's chunks: nothing of the skipped ones
    assert requests >= 1
    assert out["params"]["layer0"] == {"kernel": None, "bias": ...}
    assert out["opt_state"] == [None, ...] and out["name"] is None and out["step"] == 101
    np.testing.assert_array_equal(out["params"]["layer1"]["kernel"], tree["params"]["layer1"]["kernel"])


def test_a_boolean_mask_skips_false_leaves(ckpt):
    # jax.tree.map(predicate, load_pytreedef(...)) gives a mask of bools: False skips.
    path, tree = ckpt
    spec = jtree.load_pytreedef(path)
    mask = {"params": {"layer0": {"kernel": False, "bias": True},
                       "layer1": {"kernel": False, "bias": False}},
            "opt_state": [False, False], "step": True, "name": False}
    with jtree.open(path, mmap=False) as f:
        out, read, _ = _read_during(f, lambda: jtree.load(f, mask))
        want = _stored(f, "params/layer0/bias")
    assert read == want
    assert out["params"]["layer0"]["kernel"] is None and out["params"]["layer1"] == \
        {"kernel": None, "bias": None}
    assert out["opt_state"] == [None, None] and out["name"] is None and out["step"] == 101
    np.testing.assert_array_equal(out["params"]["layer0"]["bias"],
                                  tree["params"]["layer0"]["bias"])
    assert spec["params"]["layer0"]["bias"].is_array


def test_false_over_a_subtree_keeps_its_structure_with_none_leaves(ckpt):
    # As JAX's load does with a mask prefix (issue 20 defect 7): the subtree's containers come
    # back with None at every leaf, and nothing under it is read. None keeps skipping whole.
    path, tree = ckpt
    with jtree.open(path, mmap=False) as f:
        out, read, _ = _read_during(f, lambda: jtree.load(f, {"params": False, "opt_state": None,
                                                              "step": True, "name": False}))
    assert read == 0
    assert out["params"] == {"layer0": {"kernel": None, "bias": None},
                             "layer1": {"kernel": None, "bias": None}}
    assert out["opt_state"] is None and out["step"] == 101 and out["name"] is None
    with jtree.open(path, mmap=False) as f:
        pruned = jtree.load(f, {"params": False, "step": True}, prune=True)
    assert pruned == {"step": 101}


def test_a_dict_target_may_name_only_some_keys(ckpt):
    path, tree = ckpt
    with jtree.open(path, mmap=False) as f:
        out, read, _ = _read_during(f, lambda: jtree.load(f, {"params": {"layer0": True}, "step": 0}))
        want = _stored(f, "params/layer0/kernel") + _stored(f, "params/layer0/bias")
    assert list(out) == ["params", "step"] and list(out["params"]) == ["layer0"]
    assert read == want
    assert_same(out["params"]["layer0"], tree["params"]["layer0"])


@pytest.mark.parametrize("patterns, chosen", [
    ("params/*/kernel", ["params/layer0/kernel", "params/layer1/kernel"]),
    (["**/bias"], ["params/layer0/bias", "params/layer1/bias"]),
    (["params/layer1", "opt_state/1"], ["params/layer1/kernel", "params/layer1/bias",
                                        "opt_state/1"]),
    ("step", []),
])  # (a pattern that matches nothing is an error: test_selection.py)
def test_key_path_patterns(ckpt, patterns, chosen):
    path, tree = ckpt
    with jtree.open(path, mmap=False) as f:
        out, read, _ = _read_during(f, lambda: jtree.load(f, keys=patterns))
        want = sum(_stored(f, p) for p in chosen)
    assert read == want
    leaves = {
        "params/layer0/kernel": out["params"]["layer0"]["kernel"],
        "params/layer0/bias": out["params"]["layer0"]["bias"],
        "params/layer1/kernel": out["params"]["layer1"]["kernel"],
        "params/layer1/bias": out["params"]["layer1"]["bias"],
        "opt_state/0": out["opt_state"][0], "opt_state/1": out["opt_state"][1],
    }
    for p, v in leaves.items():
        assert (v is not None) == (p in chosen), p
    assert (out["step"] == 101) == (patterns == "step")


def test_patterns_and_masks_combine(ckpt):
    path, _ = ckpt
    out = jtree.load(path, {"params": True, "opt_state": None, "step": True, "name": True},
                     keys="params/layer0/*")
    assert out["params"]["layer1"]["kernel"] is None and out["opt_state"] is None
    assert out["params"]["layer0"]["bias"].shape == (65536,)


def test_target_tree_casts_dtypes(ckpt):
    path, tree = ckpt
    spec = jtree.load_pytreedef(path)
    spec["params"]["layer0"]["kernel"] = dataclasses.replace(
        spec["params"]["layer0"]["kernel"], dtype=np.float16)
    spec["opt_state"][0] = np.empty((512, 1024), ml_dtypes.bfloat16)  # a concrete target
    out = jtree.load(path, spec)
    k = out["params"]["layer0"]["kernel"]
    assert k.dtype == np.float16
    np.testing.assert_array_equal(k, tree["params"]["layer0"]["kernel"].astype(np.float16))
    assert out["opt_state"][0].dtype == ml_dtypes.bfloat16
    assert out["params"]["layer1"]["kernel"].dtype == np.float32


def test_cast_option_forms(path):
    rng = np.random.default_rng(9)
    tree = {"w": rng.standard_normal(100).astype(ml_dtypes.bfloat16),
            "f8": rng.standard_normal(10).astype(ml_dtypes.float8_e4m3fn),
            "i": np.arange(5, dtype=np.int32), "d": np.ones(3)}
    jtree.save(tree, path)
    out = jtree.load(path, cast=np.float32)  # every floating-point array
    assert {k: v.dtype.name for k, v in out.items()} == \
        {"w": "float32", "f8": "float32", "i": "int32", "d": "float32"}
    np.testing.assert_array_equal(out["w"], tree["w"].astype(np.float32))
    out = jtree.load(path, cast={"bfloat16": np.float64, np.int32: "int64"})
    assert (out["w"].dtype, out["i"].dtype, out["f8"].dtype) == \
        (np.float64, np.int64, ml_dtypes.float8_e4m3fn)
    out = jtree.load(path, cast=lambda key_path, dtype: "float16" if key_path == "d" else None)
    assert out["d"].dtype == np.float16 and out["w"].dtype == ml_dtypes.bfloat16
    with pytest.raises(jtree.InvalidArgumentError, match="not a dtype"):
        jtree.load(path, cast="float128x")


def test_shape_mismatch_needs_pad_truncate(path):
    a = np.arange(16, dtype=np.int64)
    b = np.arange(12.0).reshape(3, 4)
    jtree.save({"a": a, "b": b}, path)
    target = {"a": np.empty(8, np.int64), "b": jtree.LeafSpec("array", (5, 2), np.float32)}
    with pytest.raises(jtree.InvalidArgumentError) as e:
        jtree.load(path, target)
    assert "pad_truncate=True" in str(e.value) and "(16,)" in str(e.value) and path in str(e.value)
    out = jtree.load(path, target, pad_truncate=True)
    np.testing.assert_array_equal(out["a"], a[:8])
    expect = np.zeros((5, 2), np.float32)
    expect[:3] = b[:, :2]
    np.testing.assert_array_equal(out["b"], expect)
    assert out["b"].dtype == np.float32
    with pytest.raises(jtree.InvalidArgumentError, match="another rank"):
        jtree.load(path, {"a": np.empty((4, 4)), "b": True}, pad_truncate=True)


def test_truncation_reads_only_the_kept_rows(path):
    w = _rand((4096, 256), 11)  # 4 MiB
    jtree.save({"w": w}, path, compression=None, chunk_bytes=64 << 10)
    with jtree.open(path, mmap=False) as f:
        out, read, _ = _read_during(
            f, lambda: jtree.load(f, {"w": np.empty((100, 256), np.float32)}, pad_truncate=True))
    np.testing.assert_array_equal(out["w"], w[:100])
    # The first two chunks, not the 4 MiB. The writer stores chunks in the order its threads
    # finish them, so another chunk may lie between those two, and a read fetches a gap of up
    # to ReadOptions::coalesce_gap (64 KiB) rather than make a second request.
    assert read <= 2 * (64 << 10) + (64 << 10)


def test_out_arrays_are_filled_in_place(path, torch):
    rng = np.random.default_rng(12)
    tree = {"a": rng.standard_normal((64, 64)).astype(np.float32),
            "b": rng.integers(0, 100, 1000).astype(np.int16),
            "c": rng.standard_normal(10), "t": rng.standard_normal((8, 8)).astype(np.float32),
            "s": "kept as loaded"}
    jtree.save(tree, path)
    out = {"a": np.zeros((64, 64), np.float32), "b": np.zeros(1000, np.int16),
           "c": np.zeros(10, np.float32),  # another dtype: cast into it
           "t": torch.zeros(8, 8), "s": None}
    addr = out["a"].ctypes.data
    got = jtree.load(path, out=out)
    assert got["a"] is out["a"] and got["b"] is out["b"] and got["c"] is out["c"]
    assert got["t"] is out["t"] and got["s"] is None
    assert out["a"].ctypes.data == addr
    np.testing.assert_array_equal(out["a"], tree["a"])
    np.testing.assert_array_equal(out["b"], tree["b"])
    np.testing.assert_array_equal(out["c"], tree["c"].astype(np.float32))
    np.testing.assert_array_equal(out["t"].numpy(), tree["t"])
    with pytest.raises(jtree.InvalidArgumentError, match="pytree= or out="):
        jtree.load(path, {"a": True}, out=out)


def test_target_tree_mismatches_name_the_key_path(ckpt):
    path, _ = ckpt
    with pytest.raises(jtree.InvalidArgumentError) as e:
        jtree.load(path, {"params": {"layer0": [1, 2]}})
    assert "params/layer0" in str(e.value) and path in str(e.value)
    with pytest.raises(jtree.NotFoundError) as e:
        jtree.load(path, {"params": {"layer9": True}})
    assert "layer9" in str(e.value) and isinstance(e.value, LookupError)
    with pytest.raises(jtree.InvalidArgumentError, match="the target has 1 children here; the file.s list has 2"):
        jtree.load(path, {"opt_state": [True]})
    with pytest.raises(jtree.InvalidArgumentError, match="file has a dict"):
        jtree.load(path, {"params": np.zeros(3)})
    with pytest.raises(jtree.InvalidArgumentError, match="file has a list"):
        jtree.load(path, {"opt_state": {"a": 1}})


def test_load_as_torch_decodes_into_the_tensors(path, torch):
    w = _rand((300, 200), 13)
    b = _rand((10,), 14).astype(ml_dtypes.bfloat16)
    jtree.save({"w": w, "b": b, "i4": np.arange(-3, 3).astype(ml_dtypes.int4)}, path)
    out = jtree.load(path, framework="torch", keys=["w", "b"])
    assert out["w"].dtype == torch.float32 and torch.equal(out["w"], torch.from_numpy(w))
    assert out["b"].dtype == torch.bfloat16
    assert torch.equal(out["b"].view(torch.int16), torch.from_numpy(b.view(np.int16)))
    with pytest.raises(jtree.NotSupportedError, match="PyTorch has no dtype for int4"):
        jtree.load(path, framework="torch")
    out = jtree.load(path, framework="torch", cast={"int4": "int8"})
    assert out["i4"].tolist() == [-3, -2, -1, 0, 1, 2] and out["i4"].dtype == torch.int8


def test_loads_decode_straight_into_the_returned_arrays(path):
    # NumPy allocations are traced by tracemalloc: a load that decoded into a temporary and
    # copied would peak at twice the array; out= arrays are filled with no allocation at all.
    import tracemalloc
    w = _rand((4096, 2048), 15)  # 32 MiB, incompressible: zstd chunks
    jtree.save({"w": w}, path, chunk_bytes=1 << 20)
    out = np.empty_like(w)

    def peak(fn):
        tracemalloc.start()
        try:
            result = fn()
            return tracemalloc.get_traced_memory()[1], result
        finally:
            tracemalloc.stop()

    p, got = peak(lambda: jtree.load(path))
    assert w.nbytes <= p < w.nbytes + (2 << 20), p
    np.testing.assert_array_equal(got["w"], w)
    del got
    p, got = peak(lambda: jtree.load(path, out={"w": out}))
    assert p < 1 << 20, p
    assert got["w"] is out
    np.testing.assert_array_equal(out, w)
    # The measurement sees copies: a cast needs the stored array and the result.
    p, _ = peak(lambda: jtree.load(path, cast=np.float64))
    assert p >= w.nbytes * 3, p
