"""jtree convert with safetensors: one file and Hugging Face sharded checkpoints in, bit for bit
against what safetensors' own library wrote and reads; .jtree -> safetensors out; metadata kept;
verify; progress; memory stays about a tensor (measured in a fresh process)."""
import json
import os

import numpy as np
import pytest

import jtree
from conftest import require
from convert_util import assert_tensor_equal, peak_rss_growth, raw, write_hf_sharded


def _tensors(torch):
    g = torch.Generator().manual_seed(0)
    f = torch.randn(64, 48, generator=g)
    return {
        "model.embed_tokens.weight": f.to(torch.bfloat16),
        "model.layers.0.mlp.up_proj.weight": f[:16].clone(),
        "model.layers.0.mlp.down_proj.weight": f[:8].to(torch.float16),
        "model.layers.0.fp8_e4m3": f[:4].to(torch.float8_e4m3fn),
        "model.layers.0.fp8_e5m2": f[:4].to(torch.float8_e5m2),
        "model.layers.1.f64": f[:3].double(),
        "ids": torch.arange(-5, 7, dtype=torch.int64),
        "i32": torch.arange(10, dtype=torch.int32),
        "i16": torch.arange(10, dtype=torch.int16),
        "i8": torch.arange(-3, 3, dtype=torch.int8),
        "u8": torch.arange(200, 210, dtype=torch.uint8),
        "mask": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 7),
    }


def test_single_file_bit_exact(tmp_path):
    torch = require("torch")
    st = require("safetensors.torch")
    ts = _tensors(torch)
    src = str(tmp_path / "model.safetensors")
    st.save_file(ts, src, metadata={"format": "pt", "note": "héllo"})
    dst = str(tmp_path / "model.jtree")
    stats = jtree.convert(src, dst)
    assert stats.src_format == "safetensors" and stats.dst_format == "jtree"
    assert stats.leaves == len(ts)
    back = jtree.load(dst)
    assert set(back) == set(ts)
    for k, t in ts.items():
        assert_tensor_equal(back[k], t, k)
    with jtree.open(dst) as f:
        assert f.metadata == {"format": "pt", "note": "héllo"}
    # and what safetensors itself reads from the source
    ref = st.load_file(src)
    for k in ts:
        assert_tensor_equal(back[k], ref[k], k)


def test_numpy_written_file(tmp_path):
    sn = require("safetensors.numpy")
    arrs = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.array([1, 2], np.uint64),
            "c": np.ones((2, 2, 2), np.complex64)}
    src = str(tmp_path / "n.safetensors")
    sn.save_file(arrs, src)
    dst = str(tmp_path / "n.jtree")
    jtree.convert(src, dst, verify=True)
    back = jtree.load(dst)
    for k, a in arrs.items():
        assert back[k].dtype == a.dtype and raw(back[k]) == raw(a)


@pytest.mark.parametrize("given", ["index", "directory"])
def test_hf_sharded_checkpoint(tmp_path, given):
    torch = require("torch")
    ts = _tensors(torch)
    d = str(tmp_path / "ckpt")
    index = write_hf_sharded(d, ts, 4, metadata={"extra": "x"})
    shards = [n for n in os.listdir(d) if n.endswith(".safetensors")]
    assert len(shards) == 4
    dst = str(tmp_path / "sharded.jtree")
    stats = jtree.convert(index if given == "index" else d, dst, verify=True)
    assert stats.verified and stats.leaves == len(ts)
    back = jtree.load(dst)
    assert list(back) == sorted(ts)  # the index's order
    for k, t in ts.items():
        assert_tensor_equal(back[k], t, k)
    with jtree.open(dst) as f:
        md = f.metadata
    assert md["format"] == "pt" and md["extra"] == "x"
    assert int(md["total_size"]) == sum(t.numel() * t.element_size() for t in ts.values())


def test_compression_options(tmp_path):
    sn = require("safetensors.numpy")
    src = str(tmp_path / "z.safetensors")
    sn.save_file({"z": np.zeros((1 << 20,), np.float32)}, src)
    small, big = str(tmp_path / "c.jtree"), str(tmp_path / "u.jtree")
    jtree.convert(src, small, compression="zstd", level=3)
    jtree.convert(src, big, compression=None)
    assert os.path.getsize(small) < os.path.getsize(big) // 10
    assert os.path.getsize(big) >= 4 << 20
    assert raw(jtree.load(small)["z"]) == raw(jtree.load(big)["z"])
    with pytest.raises(jtree.InvalidArgumentError):
        jtree.convert(src, str(tmp_path / "x.jtree"), compression="lz4")


def test_round_trip_jtree_safetensors_jtree(tmp_path):
    require("ml_dtypes")
    import ml_dtypes

    tree = {"w": np.arange(6, dtype=np.float32).reshape(2, 3),
            "b": np.arange(4).astype(ml_dtypes.bfloat16),
            "f8": np.linspace(-2, 2, 5).astype(ml_dtypes.float8_e4m3fn),
            "e": np.zeros((0, 2), np.int16), "s": np.array(7, np.int64)}
    a = str(tmp_path / "a.jtree")
    jtree.save(tree, a, metadata={"k": "v"})
    st_path = str(tmp_path / "a.safetensors")
    jtree.convert(a, st_path, verify=True)
    # safetensors' own reader agrees
    from safetensors import safe_open  # noqa: PLC0415

    with safe_open(st_path, "np") as f:
        assert f.metadata() == {"k": "v"}
        assert raw(f.get_tensor("w")) == raw(tree["w"])
        assert f.get_tensor("s").shape == ()
    b = str(tmp_path / "b.jtree")
    jtree.convert(st_path, b, verify=True)
    back = jtree.load(b)
    assert list(back) == list(tree)
    for k, v in tree.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape and raw(back[k]) == raw(v)
    with jtree.open(b) as f:
        assert f.metadata == {"k": "v"}


def test_nested_tree_gets_dotted_names(tmp_path):
    st = require("safetensors.numpy")
    src = str(tmp_path / "n.jtree")
    jtree.save({"model": {"layers": [{"w": np.ones(2)}, {"w": np.zeros(3)}]}}, src)
    dst = str(tmp_path / "n.safetensors")
    jtree.convert(src, dst)
    got = st.load_file(dst)
    assert sorted(got) == ["model.layers.0.w", "model.layers.1.w"]
    assert raw(got["model.layers.1.w"]) == raw(np.zeros(3))


def test_to_safetensors_refuses_non_arrays_and_clashes(tmp_path):
    src = str(tmp_path / "s.jtree")
    jtree.save({"w": np.ones(2), "step": 3}, src)
    dst = str(tmp_path / "s.safetensors")
    with open(dst, "wb") as f:
        f.write(b"previous")
    with pytest.raises(jtree.InvalidArgumentError, match="step.*only tensors"):
        jtree.convert(src, dst)
    assert open(dst, "rb").read() == b"previous"  # kept
    assert sorted(os.listdir(tmp_path)) == ["s.jtree", "s.safetensors"]  # no temp file left
    jtree.save({"a.b": np.ones(1), "a": {"b": np.ones(1)}}, src)
    with pytest.raises(jtree.InvalidArgumentError, match="both named 'a.b'"):
        jtree.convert(src, dst)
    jtree.save({"c": np.ones(1, np.complex128)}, src)
    with pytest.raises(jtree.NotSupportedError, match="complex128"):
        jtree.convert(src, dst)
    jtree.save({"w": np.ones(1)}, src, metadata={"bin": b"\xff\xfe"})
    with pytest.raises(jtree.InvalidArgumentError, match="not UTF-8"):
        jtree.convert(src, dst)


def _index(path):
    with open(path) as f:
        return json.load(f)


def test_sharded_output_read_by_safetensors(tmp_path):
    """max_shard_size writes shards and an index as transformers' save_pretrained does;
    safetensors' own loader reads each shard, and the index maps every tensor to its shard."""
    torch = require("torch")
    st = require("safetensors.torch")
    ts = {f"model.layers.{i}.w": torch.full((100,), float(i)) for i in range(5)}
    ts["model.big"] = torch.arange(300, dtype=torch.float32)  # 1200 bytes: a shard alone
    src = str(tmp_path / "m.jtree")
    jtree.save({k: t.numpy() for k, t in ts.items()}, src, metadata={"format": "pt"})
    out = tmp_path / "out"
    stats = jtree.convert(src, str(out) + "/", max_shard_size=850, verify=True)
    assert stats.verified and stats.output == str(out / "model.safetensors.index.json")
    names = [f"model-{i:05d}-of-00004.safetensors" for i in range(1, 5)]
    assert sorted(os.listdir(out)) == names + ["model.safetensors.index.json"]
    index = _index(out / "model.safetensors.index.json")
    assert index["metadata"] == {"total_size": 5 * 400 + 1200}
    # In order, a new shard when the next tensor would exceed 850 bytes; the big one alone,
    # placed as huggingface_hub places it: before the shard still being filled.
    assert index["weight_map"] == {
        "model.layers.0.w": names[0], "model.layers.1.w": names[0],
        "model.layers.2.w": names[1], "model.layers.3.w": names[1],
        "model.big": names[2], "model.layers.4.w": names[3]}
    got = {}
    for name in names:
        part = st.load_file(str(out / name))
        assert all(index["weight_map"][k] == name for k in part)
        got.update(part)
    assert sorted(got) == sorted(ts)
    for k, t in ts.items():
        assert torch.equal(got[k], t), k
    # Back in through jtree's reader of sharded checkpoints (given the directory).
    jtree.convert(str(out), str(tmp_path / "back.jtree"))
    back = jtree.load(str(tmp_path / "back.jtree"), framework="torch")
    assert all(torch.equal(back[k], t) for k, t in ts.items())


def test_sharded_output_sizes_names_and_overwrite(tmp_path):
    """'5GB' is 10**9 bytes (as transformers reads it), 'KiB' binary; DIR/NAME.safetensors
    names the shards NAME-0000i-of-0000n; what fits one shard is the one file, and an
    overwrite removes the other layout's files."""
    from jtree.convert._to_safetensors import parse_size  # noqa: PLC0415

    assert parse_size("5GB") == 5 * 10**9 and parse_size("2KiB") == 2048
    assert parse_size(" 1.5 mb ") == 1_500_000 and parse_size(7) == 7
    for bad in ("5XB", "-1", 0, "GB", True):
        with pytest.raises(jtree.InvalidArgumentError, match="max_shard_size"):
            parse_size(bad)
    src = str(tmp_path / "m.jtree")
    jtree.save({f"w{i}": np.full((100,), i, np.float32) for i in range(3)}, src)
    dst = str(tmp_path / "x.safetensors")
    jtree.convert(src, dst, max_shard_size="0.5KB")
    shards = [f"x-{i:05d}-of-00003.safetensors" for i in range(1, 4)]
    assert sorted(os.listdir(tmp_path)) == ["m.jtree"] + shards + ["x.safetensors.index.json"]
    with pytest.raises(jtree.AlreadyExistsError, match="x-00001-of-00003"):
        jtree.convert(src, dst, overwrite=False)
    jtree.convert(src, dst, max_shard_size="2KiB")  # fits one: the single file, no index
    assert sorted(os.listdir(tmp_path)) == ["m.jtree", "x.safetensors"]
    sn = require("safetensors.numpy")
    assert sorted(sn.load_file(dst)) == ["w0", "w1", "w2"]
    jtree.convert(src, dst, max_shard_size=400)
    assert sorted(os.listdir(tmp_path)) == ["m.jtree"] + shards + ["x.safetensors.index.json"]


def test_directory_destination(tmp_path):
    """A directory is a clear choice: safetensors (to_format or max_shard_size) writes a
    checkpoint into it; another format asks for a file name."""
    src = str(tmp_path / "m.jtree")
    jtree.save({"w": np.ones(4, np.float32)}, src)
    d = tmp_path / "d"
    d.mkdir()
    with pytest.raises(jtree.InvalidArgumentError,
                       match=r"is a directory: name the jtree file to write in it.*"
                             r"to_format='safetensors'"):
        jtree.convert(src, str(d))
    st = jtree.convert(src, str(d), to_format="safetensors")
    assert st.output == str(d / "model.safetensors") and os.listdir(d) == ["model.safetensors"]
    with pytest.raises(jtree.InvalidArgumentError, match="max_shard_size shards safetensors"):
        jtree.convert(src, str(tmp_path / "m2.jtree"), max_shard_size="5GB")


def test_progress_callback_and_overwrite(tmp_path):
    sn = require("safetensors.numpy")
    arrs = {f"t{i}": np.full((1000,), i, np.float32) for i in range(5)}
    src = str(tmp_path / "p.safetensors")
    sn.save_file(arrs, src)
    calls = []
    dst = str(tmp_path / "p.jtree")
    jtree.convert(src, dst, progress=lambda done, total: calls.append((done, total)))
    total = 5 * 4000
    assert calls[0] == (0, total) and calls[-1] == (total, total)
    assert all(t == total for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    calls.clear()
    back = str(tmp_path / "p2.safetensors")
    jtree.convert(dst, back, progress=lambda d, t: calls.append((d, t)))
    assert calls[-1] == (total, total) and len(calls) >= 5
    with pytest.raises(jtree.AlreadyExistsError):
        jtree.convert(src, dst, overwrite=False)
    with pytest.raises(jtree.NotFoundError):
        jtree.convert(str(tmp_path / "missing.safetensors"), dst)
    with pytest.raises(jtree.InvalidArgumentError, match="already a .jtree"):
        jtree.convert(dst, str(tmp_path / "again.jtree"))


def test_verify_detects_a_difference(tmp_path, monkeypatch):
    sn = require("safetensors.numpy")
    src = str(tmp_path / "v.safetensors")
    sn.save_file({"a": np.arange(4, dtype=np.int32)}, src)
    from jtree.convert import _driver  # noqa: PLC0415

    real = _driver.same_leaf
    monkeypatch.setattr(_driver, "same_leaf", lambda a, b: False)
    with pytest.raises(jtree.CorruptionError, match="verify"):
        jtree.convert(src, str(tmp_path / "v.jtree"), verify=True)
    monkeypatch.setattr(_driver, "same_leaf", real)
    assert not real(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    nan = np.array([np.nan], np.float32)
    assert real(nan, nan.copy())
    assert not real(np.zeros(2, np.float32), np.zeros(2, np.int32))


# ---- memory -------------------------------------------------------------------------------------

N_TENSORS, TENSOR_BYTES = 20, 10 << 20


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    sn = require("safetensors.numpy")
    d = tmp_path_factory.mktemp("big")
    rng = np.random.default_rng(0)
    # random bytes: zstd cannot shrink them, the writer handles every byte
    arrs = {f"layer.{i}.w": rng.integers(0, 1 << 30, TENSOR_BYTES // 4, dtype=np.int32)
            for i in range(N_TENSORS)}
    path = str(d / "big.safetensors")
    sn.save_file(arrs, path)
    return path


def test_memory_stays_about_a_tensor(big_file, tmp_path):
    data = N_TENSORS * TENSOR_BYTES
    dst = str(tmp_path / "big.jtree")
    before, after = peak_rss_growth(f"""
        def run():
            jtree.convert({big_file!r}, {dst!r})
    """)
    growth = after - before
    assert growth < data * 0.5, f"peak RSS grew by {growth >> 20} MiB converting {data >> 20} MiB"
    # The same measurement sees a load of everything: the bound can fail.
    _, after_all = peak_rss_growth(f"""
        def run():
            import safetensors.numpy as sn
            global keep
            keep = sn.load_file({big_file!r})
    """)
    assert after_all - before > data * 0.5
    # and out again: .jtree -> safetensors, leaf by leaf
    out = str(tmp_path / "again.safetensors")
    before, after = peak_rss_growth(f"""
        def run():
            jtree.convert({dst!r}, {out!r})
    """)
    assert after - before < data * 0.5, f"peak RSS grew by {(after - before) >> 20} MiB"
    assert os.path.getsize(out) == os.path.getsize(big_file) or \
        json.loads(open(out, "rb").read()[8:8 + int.from_bytes(open(out, "rb").read(8),
                                                                  "little")])
