"""jtree convert from PyTorch files (torch.save) and NumPy .npy/.npz, bit for bit against what
the peers' own libraries wrote: structure kept, tied tensors stored once, pickle refused unless
allowed, every dtype; memory about a tensor for torch files too."""
import os

import numpy as np
import pytest

import jtree
from conftest import require
from convert_util import assert_tensor_equal, peak_rss_growth, raw


def _state(torch):
    g = torch.Generator().manual_seed(1)
    w = torch.randn(32, 16, generator=g)
    return {
        "emb.weight": w.to(torch.bfloat16),
        "lin.weight": w.clone(),
        "lin.bias": torch.randn(32, generator=g).to(torch.float16),
        "q": w[:4].to(torch.float8_e4m3fn),
        "q2": w[:4].to(torch.float8_e5m2),
        "steps": torch.arange(5, dtype=torch.int64),
        "flags": torch.tensor([True, False]),
        "c": torch.complex(w[:2], w[2:4]),
        "scalar": torch.tensor(2.5, dtype=torch.float64),
        "empty": torch.zeros(0, 3),
        "strided": w[:, ::2],  # a non-contiguous view: saved as its own storage slice
    }


@pytest.mark.parametrize("zip_format", [True, False])
def test_state_dict_bit_exact(tmp_path, zip_format):
    torch = require("torch")
    sd = _state(torch)
    if not zip_format:  # torch.load itself fails on float8 in the legacy format (torch 2.13)
        del sd["q"], sd["q2"]
    src = str(tmp_path / "sd.pt")
    torch.save(sd, src, _use_new_zipfile_serialization=zip_format)
    dst = str(tmp_path / "sd.jtree")
    stats = jtree.convert(src, dst, verify=True)
    assert stats.src_format == "torch" and stats.verified
    back = jtree.load(dst)
    assert list(back) == list(sd)
    for k, t in sd.items():
        assert_tensor_equal(back[k], t, k)
    # and as torch tensors, equal to torch.load's
    ref = torch.load(src, weights_only=True)
    tt = jtree.load(dst, framework="torch")
    for k in sd:
        assert tt[k].dtype == ref[k].dtype and tt[k].shape == ref[k].shape, k
        assert torch.equal(tt[k].float() if "float8" in str(tt[k].dtype) else tt[k],
                           ref[k].float() if "float8" in str(ref[k].dtype) else ref[k]), k


def test_tied_weights_stored_once(tmp_path):
    torch = require("torch")
    w = torch.randn(256, 256)
    src = str(tmp_path / "tied.pt")
    torch.save({"embed.weight": w, "lm_head.weight": w}, src)
    dst = str(tmp_path / "tied.jtree")
    jtree.convert(src, dst)
    assert os.path.getsize(dst) < 1.5 * w.numel() * 4
    back = jtree.load(dst, framework="torch")
    assert back["embed.weight"].data_ptr() == back["lm_head.weight"].data_ptr()


def test_checkpoint_structure_kept(tmp_path):
    torch = require("torch")
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(5, 4)).sum().backward()
    opt.step()
    ck = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 7,
          "shape": torch.Size([2, 3]), "dtype": torch.bfloat16, "name": "run-1", "none": None}
    src = str(tmp_path / "ck.pt")
    torch.save(ck, src)
    dst = str(tmp_path / "ck.jtree")
    jtree.convert(src, dst, verify=True)
    back = jtree.load(dst, framework="torch")
    assert back["epoch"] == 7 and back["name"] == "run-1" and back["none"] is None
    assert list(back["model"]) == list(ck["model"])
    state = back["optimizer"]["state"]
    assert sorted(state) == [0, 1, 2, 3]  # int parameter ids stay ints
    assert torch.equal(state[0]["exp_avg"], ck["optimizer"]["state"][0]["exp_avg"])
    assert back["optimizer"]["param_groups"][0]["lr"] == 1e-3
    assert back["optimizer"]["param_groups"][0]["params"] == [0, 1, 2, 3]
    # the optimizer accepts what came back
    opt2 = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt2.load_state_dict(back["optimizer"])


def test_pickle_refused_unless_allowed(tmp_path):
    torch = require("torch")
    import argparse  # noqa: PLC0415

    src = str(tmp_path / "p.pt")
    torch.save({"w": torch.ones(3), "args": argparse.Namespace(lr=0.1)}, src)
    dst = str(tmp_path / "p.jtree")
    with pytest.raises(jtree.InvalidArgumentError, match="allow_pickle=True"):
        jtree.convert(src, dst)
    assert not os.path.exists(dst)
    jtree.convert(src, dst, allow_pickle=True)
    back = jtree.load(dst, allow_pickle=True)
    assert back["args"].lr == 0.1 and raw(back["w"]) == raw(np.ones(3, np.float32))


def test_torch_memory_stays_about_a_tensor(tmp_path):
    torch = require("torch")
    src = str(tmp_path / "big.pt")
    g = torch.Generator().manual_seed(0)
    torch.save({f"l{i}": torch.randint(0, 1 << 30, ((10 << 20) // 4,), generator=g,
                                       dtype=torch.int32) for i in range(20)}, src)
    data = 20 * (10 << 20)
    dst = str(tmp_path / "big.jtree")
    # (torch imported before the baseline: it alone is ~200 MiB)
    before, after = peak_rss_growth(f"""
        import torch
        def run():
            jtree.convert({src!r}, {dst!r})
    """)
    assert after - before < data * 0.5, f"peak RSS grew by {(after - before) >> 20} MiB"
    before, after_all = peak_rss_growth(f"""
        import torch
        def run():
            global keep
            keep = torch.load({src!r}, weights_only=True)
    """)
    assert after_all - before > data * 0.5


# ---- NumPy ---------------------------------------------------------------------------------------

def _arrays():
    return {
        "f32": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        "big_endian": np.arange(6, dtype=">i4"),
        "fortran": np.asfortranarray(np.arange(12.0).reshape(3, 4)),
        # (no bfloat16: .npy stores ml_dtypes types as raw void bytes, their type lost)
        "f16": np.arange(5).astype(np.float16),
        "u64": np.array([1 << 63], np.uint64),
        "c128": np.array([1 + 2j]),
        "b": np.array([True, False]),
        "scalar": np.array(3.0),
        "empty": np.zeros((0, 5), np.int8),
        "large": np.random.default_rng(0).standard_normal(100_000).astype(np.float32),
    }


def _check_same(back, arrs):
    for k, a in arrs.items():
        b = back[k]
        assert b.shape == a.shape, k
        assert b.dtype.newbyteorder("=") == a.dtype.newbyteorder("="), k
        assert np.array_equal(np.asarray(b, dtype=a.dtype.newbyteorder("=")),
                              a.astype(a.dtype.newbyteorder("="))), k


@pytest.mark.parametrize("kind", ["npz", "npz_compressed"])
def test_npz(tmp_path, kind):
    arrs = _arrays()
    src = str(tmp_path / "a.npz")
    (np.savez if kind == "npz" else np.savez_compressed)(src, **arrs)
    dst = str(tmp_path / "a.jtree")
    stats = jtree.convert(src, dst, verify=True)
    assert stats.src_format == "numpy" and stats.leaves == len(arrs)
    back = jtree.load(dst)
    assert list(back) == list(arrs)
    _check_same(back, arrs)
    with np.load(src) as ref:
        _check_same(back, {k: ref[k] for k in ref.files})


def test_npy(tmp_path):
    for name, a in _arrays().items():
        src = str(tmp_path / f"{name}.npy")
        np.save(src, a)
        dst = str(tmp_path / f"{name}.jtree")
        jtree.convert(src, dst, verify=True)
        _check_same({name: jtree.load(dst)}, {name: a})


def test_object_arrays_need_allow_pickle(tmp_path):
    src = str(tmp_path / "o.npz")
    np.savez(src, o=np.array([{"a": 1}, None], dtype=object), x=np.ones(2))
    with pytest.raises(jtree.InvalidArgumentError, match="allow_pickle"):
        jtree.convert(src, str(tmp_path / "o.jtree"))
    jtree.convert(src, str(tmp_path / "o.jtree"), allow_pickle=True)
    back = jtree.load(str(tmp_path / "o.jtree"), allow_pickle=True)
    assert back["o"][0] == {"a": 1}


def test_format_detection(tmp_path):
    torch = require("torch")
    # names that say nothing: the bytes tell
    torch.save({"w": torch.ones(2)}, str(tmp_path / "weights.dat"))
    with open(tmp_path / "arrays.dat", "wb") as f:  # (a file object: no .npz appended)
        np.savez(f, w=np.ones(2))
    with open(tmp_path / "one.dat", "wb") as f:
        np.save(f, np.ones(2))
    for name, fmt in [("weights.dat", "torch"), ("arrays.dat", "numpy"), ("one.dat", "numpy")]:
        stats = jtree.convert(str(tmp_path / name), str(tmp_path / (name + ".jtree")))
        assert stats.src_format == fmt
    (tmp_path / "junk.bin").write_bytes(b"nothing known here")
    with pytest.raises(jtree.NotSupportedError, match="from_format"):
        jtree.convert(str(tmp_path / "junk.bin"), str(tmp_path / "junk.jtree"))
    with pytest.raises(jtree.NotSupportedError, match="unknown source format"):
        jtree.convert(str(tmp_path / "one.dat"), str(tmp_path / "x.jtree"), from_format="hdf5")
    # foreign -> foreign goes through a temporary .jtree file, removed after
    jtree.convert(str(tmp_path / "weights.dat"), str(tmp_path / "w.safetensors"), verify=True)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".convert.jtree")]
    from safetensors.numpy import load_file  # noqa: PLC0415

    assert raw(load_file(str(tmp_path / "w.safetensors"))["w"]) == raw(np.ones(2, np.float32))


def test_large_tensors_mapped_and_released_bit_exact(tmp_path):
    """Tensors past the small-tensor size are memory maps of the file, fetched when written and
    their pages dropped after: still bit-exact when verify reads them again."""
    torch = require("torch")
    g = torch.Generator().manual_seed(3)
    w = torch.randn(512, 1024, generator=g)
    sd = {"a": w, "b": w.to(torch.bfloat16), "view": w[:, 1::3], "same": w,
          "tail": torch.randn(300_001, generator=g).to(torch.float16)}
    src = str(tmp_path / "l.pt")
    torch.save(sd, src)
    dst = str(tmp_path / "l.jtree")
    jtree.convert(src, dst, verify=True)
    back = jtree.load(dst)
    for k, t in sd.items():
        assert_tensor_equal(back[k], t, k)
    assert os.path.getsize(dst) < 2.5 * w.numel() * 4  # "same" tied to "a", not stored twice


def test_release_pages_leaves_other_memory_alone():
    from jtree.convert._common import release_pages  # noqa: PLC0415

    a = np.arange(1 << 20, dtype=np.int64)  # anonymous memory: DONTNEED would zero it
    addr = a.ctypes.data
    release_pages(addr, a.nbytes, [(0, 4096)])
    release_pages(addr, a.nbytes, [])
    assert a[-1] == (1 << 20) - 1 and a[123456] == 123456
