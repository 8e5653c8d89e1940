"""A rank's shard in one pass: load(slices=...) with jtree.TensorParallel, pattern dicts and
functions; host loads, device loads through the host stand-in (one native call for every box),
out= arrays, expert parallelism, and the errors a serving stack meets."""
import dataclasses

import numpy as np
import pytest

import jtree
from jtree import _device

from conftest import require

H, V, E = 16, 12, 4  # hidden size, vocabulary, experts


def _llama(rng):
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    sd = {"model.embed_tokens.weight": f(V, H), "lm_head.weight": f(V, H),
          "model.norm.weight": f(H)}
    for i in range(2):
        p = f"model.layers.{i}."
        sd.update({p + "self_attn.q_proj.weight": f(H, H), p + "self_attn.k_proj.weight": f(8, H),
                   p + "self_attn.v_proj.weight": f(8, H), p + "self_attn.o_proj.weight": f(H, H),
                   p + "mlp.gate_proj.weight": f(32, H), p + "mlp.up_proj.weight": f(32, H),
                   p + "mlp.down_proj.weight": f(H, 32), p + "input_layernorm.weight": f(H)})
    return sd


def _expected(sd, rank, world):
    """Rank ``rank``'s part of each tensor, as vLLM / TGI split a Llama state dict."""
    out = {}
    for k, a in sd.items():
        if k.endswith(("q_proj.weight", "k_proj.weight", "v_proj.weight", "gate_proj.weight",
                       "up_proj.weight")):
            n = a.shape[0] // world
            out[k] = a[rank * n:(rank + 1) * n]
        elif k.endswith(("o_proj.weight", "down_proj.weight")):
            n = a.shape[1] // world
            out[k] = a[:, rank * n:(rank + 1) * n]
        elif k.endswith(("embed_tokens.weight", "lm_head.weight")):
            n = -(-a.shape[0] // world)
            out[k] = a[rank * n:(rank + 1) * n]
        else:
            out[k] = a
    return out


@pytest.fixture
def llama(path):
    sd = _llama(np.random.default_rng(3))
    # Chunks of 4 rows: the ranks' boxes cut through chunks (row splits inside a chunk, every
    # column split inside every chunk).
    jtree.save(sd, path, chunk_bytes=4 * H * 4)
    return sd


@pytest.mark.parametrize("world", [1, 2, 4])
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_every_rank_gets_its_split_and_the_ranks_cover_the_model(path, world, compression):
    sd = _llama(np.random.default_rng(world))
    jtree.save(sd, path, chunk_bytes=4 * H * 4, compression=compression)
    for rank in range(world):
        got = jtree.load(path, slices=jtree.TensorParallel(rank, world))
        want = _expected(sd, rank, world)
        assert got.keys() == want.keys()
        for k in want:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"rank {rank}: {k}")


def test_the_shard_reads_only_what_it_needs(path):
    # Rank 1 of 4 of row-split weights (chunks of 128 rows, farther apart than the reader's
    # coalescing gap) reads about a quarter of them.
    rng = np.random.default_rng(1)
    sd = {"l.q_proj.weight": rng.standard_normal((1024, 256)).astype(np.float32),
          "lm_head.weight": rng.standard_normal((1000, 256)).astype(np.float32)}
    jtree.save(sd, path, chunk_bytes=128 << 10, compression=None)
    with jtree.open(path) as f:
        before = f.io_stats()["bytes_read"]
        got = f.load(slices=jtree.TensorParallel(1, 4), mmap=False)
        read = f.io_stats()["bytes_read"] - before
        whole = f.info()["raw_bytes"]
    assert 0.25 * whole <= read < 0.35 * whole, (read, whole)
    np.testing.assert_array_equal(got["lm_head.weight"], sd["lm_head.weight"][250:500])


def test_torch_tensors_cast_and_the_plan(llama, path, torch):
    tp = jtree.TensorParallel(1, 2)
    got = jtree.load(path, slices=tp, framework="torch", cast=torch.bfloat16)
    want = _expected(llama, 1, 2)
    for k, t in got.items():
        assert isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16, k
        assert torch.equal(t, torch.from_numpy(np.ascontiguousarray(want[k])).bfloat16()), k
    plan = tp.plan(path)
    assert plan["model.layers.0.self_attn.o_proj.weight"] == ("row", (slice(0, H),
                                                                     slice(H // 2, H)))
    assert plan["model.norm.weight"] == ("replicated", None)
    assert plan["lm_head.weight"][0] == "vocab"
    assert ("q_proj.weight", "column", -1) in tp.DEFAULT_RULES


def test_a_device_shard_is_one_native_load_of_every_box(llama, path, torch, monkeypatch):
    calls = []
    native = _device._native_load

    def counted(reader, reqs, device, kw):
        calls.append(len(reqs))
        return native(reader, reqs, device, kw)

    monkeypatch.setattr(_device, "_native_load", counted)
    with _device.host_stand_in_for_tests() as stats:
        got = jtree.load(path, slices=jtree.TensorParallel(0, 2), device="cpu")
    want = _expected(llama, 0, 2)
    assert calls == [len(want)], calls  # every leaf's box in one call
    assert stats["misuses"] == 0
    for k in want:
        assert torch.equal(got[k], torch.from_numpy(np.ascontiguousarray(want[k]))), k


def test_out_arrays_of_the_parts_shapes_are_filled_in_place(llama, path, torch):
    want = _expected(llama, 1, 2)
    out = {k: np.empty_like(v) for k, v in want.items()}
    got = jtree.load(path, slices=jtree.TensorParallel(1, 2), out=out)
    for k in want:
        assert got[k] is out[k]
        np.testing.assert_array_equal(out[k], want[k])
    touts = {k: torch.empty(v.shape, dtype=torch.float16) for k, v in want.items()}
    got = jtree.load(path, slices=jtree.TensorParallel(1, 2), out=touts, framework="torch")
    for k in want:
        assert got[k] is touts[k]
        assert torch.equal(touts[k], torch.from_numpy(np.ascontiguousarray(want[k])).half())
    bad = dict(out, **{"lm_head.weight": np.empty((V, H), np.float32)})
    with pytest.raises(jtree.InvalidArgumentError, match=r"lm_head.weight.*shape \(6, 16\)"):
        jtree.load(path, slices=jtree.TensorParallel(1, 2), out=bad)


def test_expert_parallel_ranks_load_their_experts_only(path):
    rng = np.random.default_rng(5)
    sd = {f"model.layers.0.block_sparse_moe.experts.{e}.w1.weight":
          rng.standard_normal((8, H)).astype(np.float32) for e in range(E)}
    sd["model.layers.0.block_sparse_moe.gate.weight"] = rng.standard_normal((E, H)).astype(
        np.float32)
    sd["model.layers.1.mlp.experts.gate_up_proj"] = rng.standard_normal((E, H, 6)).astype(
        np.float32)
    jtree.save(sd, path)
    got = jtree.load(path, slices=jtree.TensorParallel(1, 2, expert_parallel=True))
    assert got["model.layers.0.block_sparse_moe.experts.0.w1.weight"] is None
    np.testing.assert_array_equal(got["model.layers.0.block_sparse_moe.experts.3.w1.weight"],
                                  sd["model.layers.0.block_sparse_moe.experts.3.w1.weight"])
    np.testing.assert_array_equal(got["model.layers.1.mlp.experts.gate_up_proj"],
                                  sd["model.layers.1.mlp.experts.gate_up_proj"][2:])
    np.testing.assert_array_equal(got["model.layers.0.block_sparse_moe.gate.weight"],
                                  sd["model.layers.0.block_sparse_moe.gate.weight"])
    pruned = jtree.load(path, slices=jtree.TensorParallel(1, 2, expert_parallel=True),
                        prune=True)
    assert sorted(k for k in pruned if ".experts." in k and ".w1." in k) == [
        f"model.layers.0.block_sparse_moe.experts.{e}.w1.weight" for e in (2, 3)]
    assert jtree.TensorParallel(0, 2, expert_parallel=True).plan(path)[
        "model.layers.0.block_sparse_moe.experts.3.w1.weight"] == ("experts", jtree.TensorParallel.SKIP)


def test_custom_rules_nested_names_and_keys(path):
    rng = np.random.default_rng(9)
    tree = {"params": {"attn": {"kernel": rng.standard_normal((H, 8)).astype(np.float32),
                                "out": rng.standard_normal((8, H)).astype(np.float32)},
                       "scale": np.float32(2.0) * np.ones(3, np.float32)}}
    jtree.save(tree, path)
    # flax kernels are [in, out]: column-parallel is dimension 1, row-parallel dimension 0.
    tp = jtree.TensorParallel(1, 2, rules={"attn.kernel": ("column", 1), "attn.out": ("row", 0)})
    got = jtree.load(path, slices=tp, keys="params/attn")
    np.testing.assert_array_equal(got["params"]["attn"]["kernel"],
                                  tree["params"]["attn"]["kernel"][:, 4:])
    np.testing.assert_array_equal(got["params"]["attn"]["out"], tree["params"]["attn"]["out"][4:])
    assert got["params"]["scale"] is None  # (not selected by keys=)


def test_pattern_dicts_and_functions_give_any_index(llama, path, torch):
    q = "model.layers.1.self_attn.q_proj.weight"
    got = jtree.load(path, slices={"*q_proj*": np.s_[3, 2:9:3], "**": np.s_[:2]})
    np.testing.assert_array_equal(got[q], llama[q][3, 2:9:3])
    np.testing.assert_array_equal(got["model.norm.weight"], llama["model.norm.weight"][:2])
    got = jtree.load(path, slices=lambda key, spec: np.s_[..., :1] if spec.shape[-1] == H
                     else None, framework="torch")
    assert tuple(got[q].shape) == (H, 1)
    assert torch.equal(got[q], torch.from_numpy(llama[q][..., :1].copy()))
    # A JAX load of parts: placed on the default device.
    jax = require("jax")
    got = jtree.load(path, slices={"lm_head.weight": np.s_[1:3]}, framework="jax")
    assert isinstance(got["lm_head.weight"], jax.Array)
    np.testing.assert_array_equal(np.asarray(got["lm_head.weight"]), llama["lm_head.weight"][1:3])


def test_lazy_file_slices_together(llama, path):
    with jtree.open(path) as f:
        got = f.load(slices={"*o_proj.weight": np.s_[:, :4]}, keys="*o_proj.weight",
                     prune=True)
    assert list(got) == ["model.layers.0.self_attn.o_proj.weight",
                         "model.layers.1.self_attn.o_proj.weight"]
    for k, v in got.items():
        np.testing.assert_array_equal(v, llama[k][:, :4])


def test_errors_name_the_leaf_and_never_fail_silently(llama, path):
    with pytest.raises(jtree.InvalidArgumentError, match=r"q_proj.weight.*divide evenly"):
        jtree.load(path, slices=jtree.TensorParallel(0, 3))
    with pytest.raises(jtree.NotFoundError,
                       match=r"qproj.weight' \(nearest: 'model.layers.0.self_attn.q_proj"):
        jtree.load(path, slices={"model.layers.0.self_attn.qproj.weight": np.s_[0]})
    with pytest.raises(jtree.NotFoundError, match="no array leaf's name matches a split rule"):
        jtree.load(path, slices=jtree.TensorParallel(0, 2, rules=[("nothing.here", "row")]))
    with pytest.raises(jtree.InvalidArgumentError, match="rank 2 of world 2"):
        jtree.TensorParallel(2, 2)
    with pytest.raises(jtree.InvalidArgumentError, match="a rule is"):
        jtree.TensorParallel(0, 2, rules=[("x", "diagonal")])
    with pytest.raises(jtree.InvalidArgumentError, match="negative step"):
        jtree.load(path, slices={"lm_head.weight": np.s_[::-1]})
    with pytest.raises(jtree.InvalidArgumentError, match="slices must be"):
        jtree.load(path, slices=3)
    with pytest.raises(jtree.InvalidArgumentError, match="target must be True"):
        jtree.load(path, {k: np.zeros(1) for k in llama}, slices=jtree.TensorParallel(0, 2))


def test_the_tensor_parallel_example_runs_and_its_ranks_sum_to_the_model(tmp_path):
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run([sys.executable, os.path.join(root, "examples", "python",
                                                       "tensor_parallel.py"), "--world", "2"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "rank 1: gate (128, 64), down (64, 128), embed_tokens (50, 64)" in run.stdout


def test_the_shard_benchmark_runs_and_every_system_loads_the_same_bytes(tmp_path):
    # bench/python/shard_load.py (run on a GPU by bench/gpu_checks.sh): its peers' splits are
    # written out by hand, so the digests it compares check them against TensorParallel's.
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run([sys.executable, os.path.join(root, "bench", "python", "shard_load.py"),
                          "--layers", "1", "--hidden", "256", "--inter", "512", "--kv", "64",
                          "--vocab", "100", "--runs", "1", "--dirs", str(tmp_path),
                          "--systems", "jtree-raw", "jtree-raw-tp", "safetensors"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "| jtree-raw |" in run.stdout and "| jtree-raw-tp |" in run.stdout
    assert "differ" not in run.stdout


def test_a_raw_files_parts_are_views_of_its_map_verified(path, torch):
    # Rows of a raw leaf are views of the file's copy-on-write map (no copy, as whole leaves
    # are), columns one contiguous copy; the chunks they overlap are verified all the same.
    sd = _llama(np.random.default_rng(8))
    jtree.save(sd, path, compression=None, chunk_bytes=4 * H * 4, inline_threshold=0)
    q, o = "model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.o_proj.weight"
    got = jtree.load(path, slices=jtree.TensorParallel(1, 2))
    want = _expected(sd, 1, 2)
    assert not got[q].flags.owndata and got[q].flags.writeable
    assert got[o].flags.c_contiguous
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    t = jtree.load(path, slices=jtree.TensorParallel(1, 2), framework="torch")
    assert torch.equal(t[o], torch.from_numpy(np.ascontiguousarray(want[o])))
    t[q][0, 0] = 123.0  # (copy-on-write: the file keeps its bytes)
    np.testing.assert_array_equal(jtree.load(path, slices=jtree.TensorParallel(1, 2))[q], want[q])
    # One byte of rank 1's rows of q_proj damaged: its load is a CorruptionError naming it.
    with jtree.open(path) as f:
        off = f._reader.chunks(f[q]._leaf.index)[-1][0]
    with open(path, "r+b") as fh:
        fh.seek(off + 5)
        b = fh.read(1)
        fh.seek(off + 5)
        fh.write(bytes([b[0] ^ 0xFF]))
    for fw in ("numpy", "torch"):
        with pytest.raises(jtree.CorruptionError, match=r"q_proj.weight"):
            jtree.load(path, slices=jtree.TensorParallel(1, 2), framework=fw)
    jtree.load(path, slices=jtree.TensorParallel(1, 2), verify=False)  # (asked not to check)


def test_tied_leaves_come_back_as_one_part(path, torch):
    w = np.arange(48, dtype=np.float32).reshape(12, 4)
    jtree.save({"model.embed_tokens.weight": w, "lm_head.weight": w}, path)  # (tied: stored once)
    for fw, cast in (("numpy", None), ("torch", None), ("torch", torch.float16)):
        got = jtree.load(path, slices=jtree.TensorParallel(1, 2), framework=fw, cast=cast)
        assert got["lm_head.weight"] is got["model.embed_tokens.weight"], (fw, cast)
        np.testing.assert_array_equal(np.asarray(got["lm_head.weight"], dtype=np.float32),
                                      w[6:])


def test_the_files_own_structure_as_target_with_slices(llama, path):
    spec = jtree.load_pytreedef(path)
    spec["lm_head.weight"] = dataclasses.replace(spec["lm_head.weight"], dtype=np.float16)
    spec["model.norm.weight"] = None  # (skipped)
    got = jtree.load(path, spec, slices=jtree.TensorParallel(1, 2))
    assert got["lm_head.weight"].dtype == np.float16 and got["lm_head.weight"].shape == (6, H)
    assert got["model.norm.weight"] is None
    q = "model.layers.0.self_attn.q_proj.weight"
    np.testing.assert_array_equal(got[q], _expected(llama, 1, 2)[q])



def _down_proj_model(rng):
    # A row-parallel weight (split along dimension 1) and a column-parallel one, chunks of 64
    # rows without a layout: every row-slab chunk holds a quarter for each of 4 ranks.
    return {"l.mlp.down_proj.weight": rng.standard_normal((512, 256)).astype(np.float32),
            "l.mlp.up_proj.weight": rng.standard_normal((256, 512)).astype(np.float32),
            "l.norm.weight": rng.standard_normal(256).astype(np.float32)}


def _rank_read(path, rank, world):
    """(bytes read, the rank's part) of a verified host load of rank ``rank``'s shard."""
    with jtree.open(path) as f:
        before = f.io_stats()["bytes_read"]
        got = f.load(slices=jtree.TensorParallel(rank, world), mmap=False)
        return f.io_stats()["bytes_read"] - before, got


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_shard_layout_makes_every_ranks_part_whole_chunks(tmp_path, compression):
    sd = _down_proj_model(np.random.default_rng(5))
    plain, laid = str(tmp_path / "plain.jtree"), str(tmp_path / "laid.jtree")
    jtree.save(sd, plain, chunk_bytes=64 << 10, compression=compression)
    stats = jtree.save(sd, laid, chunk_bytes=64 << 10, compression=compression,
                       shard_layout=4)
    assert stats.leaves == 3
    with jtree.open(laid) as f:
        # The row-parallel weight: cut at every 64th column (4 ranks), the column-parallel
        # one at every 64th row; the norm keeps its default grid.
        bounds = f["l.mlp.down_proj.weight"].chunk_bounds
        shape = f["l.mlp.down_proj.weight"].chunk_shape
        cols = bounds[1] if bounds else tuple(range(shape[1], 257, shape[1]))
        assert {64, 128, 192, 256} <= set(cols), (bounds, shape)
    need = sum(a.nbytes for a in _expected(sd, 1, 4).values())
    for world in (1, 2, 4):
        for rank in range(world):
            read, got = _rank_read(laid, rank, world)
            want = _expected(sd, rank, world)
            for k in want:
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"{rank}/{world} {k}")
    if compression is None:  # raw bytes read: the rank's part, not the chunks it cuts through
        read_laid, _ = _rank_read(laid, 1, 4)
        read_plain, _ = _rank_read(plain, 1, 4)
        assert read_laid <= 1.1 * need, (read_laid, need)
        assert read_plain > 1.8 * need, (read_plain, need)
    np.testing.assert_array_equal(jtree.load(laid)["l.mlp.down_proj.weight"],
                                  sd["l.mlp.down_proj.weight"])


def test_shard_layout_takes_a_tensor_parallel_and_refuses_what_cannot_be_split(tmp_path):
    sd = _down_proj_model(np.random.default_rng(6))
    p = str(tmp_path / "m.jtree")
    # Custom rules (the norm split too) through a TensorParallel: its rank does not matter.
    rules = [("norm.weight", "column")] + jtree.TensorParallel(0, 4).DEFAULT_RULES
    layout = jtree.TensorParallel(3, 4, rules=rules)
    jtree.save(sd, p, compression=None, shard_layout=layout)  # (4 MiB: one chunk per leaf)
    with jtree.open(p) as f:
        norm = f["l.norm.weight"]
        edges = norm.chunk_bounds[0] if norm.chunk_bounds else tuple(
            range(norm.chunk_shape[0], 257, norm.chunk_shape[0]))
        assert {64, 128, 192, 256} <= set(edges)
    # A rank's column tile of the raw file is one chunk: a view of the file's map, verified.
    got = jtree.load(p, slices=jtree.TensorParallel(1, 4))
    down = "l.mlp.down_proj.weight"
    assert not got[down].flags.owndata and got[down].flags.c_contiguous
    np.testing.assert_array_equal(got[down], sd[down][:, 64:128])
    jtree.nonblocking_save(sd, p, shard_layout=2).result()
    np.testing.assert_array_equal(jtree.load(p)["l.norm.weight"], sd["l.norm.weight"])
    bad = str(tmp_path / "bad.jtree")
    with pytest.raises(jtree.InvalidArgumentError,
                       match=r"leaf l\.mlp\.(up|down)_proj\.weight: .*divide evenly"):
        jtree.save(sd, bad, shard_layout=3)  # 256 rows over 3 ranks
    assert not (tmp_path / "bad.jtree").exists()
    for value in (0, -2, True, 2.0, "4"):
        with pytest.raises(jtree.InvalidArgumentError, match="shard_layout"):
            jtree.save(sd, bad, shard_layout=value)
    with pytest.raises(TypeError, match="shard_layout"):
        jtree.nonblocking_save(sd, bad, shard_layouts=2)


def test_convert_lays_a_safetensors_model_out_for_serving(tmp_path):
    from test_convert_cli import native  # (the native CLI and its environment)
    sn = require("safetensors.numpy")
    sd = _down_proj_model(np.random.default_rng(7))
    src = str(tmp_path / "m.safetensors")
    sn.save_file(sd, src)
    dst = str(tmp_path / "m.jtree")
    jtree.convert(src, dst, shard_layout=4, compression=None)
    read, got = _rank_read(dst, 2, 4)
    need = sum(a.nbytes for a in _expected(sd, 2, 4).values())
    assert read <= 1.1 * need, (read, need)
    np.testing.assert_array_equal(got["l.mlp.down_proj.weight"],
                                  sd["l.mlp.down_proj.weight"][:, 128:192])
    r = native(src, tmp_path / "c.jtree", "--shard-layout", "4", "--compression", "none", "-q")
    assert r.returncode == 0, r.stderr
    assert jtree.File(str(tmp_path / "c.jtree"))["l.mlp.down_proj.weight"].chunk_bounds == \
        jtree.File(dst)["l.mlp.down_proj.weight"].chunk_bounds
    r = native(src, tmp_path / "c.safetensors", "--shard-layout", "4")
    assert r.returncode == 1 and "shard_layout lays out a .jtree file" in r.stderr
