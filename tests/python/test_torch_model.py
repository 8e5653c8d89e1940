"""jtree.torch (save_model / load_model / save_file / load_file), device= and map_location= on
loads, targets on the meta device, and the non-array values of torch checkpoints (torch.Size,
torch.dtype, RNG states) saved without pickle."""
import random
import subprocess
import sys

import numpy as np
import pytest

import jtree
from conftest import require


def _tied_model_class(torch):
    """A small language-model-like module: an embedding whose weight the output projection
    shares (tied), a Sequential body and a buffer."""
    nn = torch.nn

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(11, 6)
            self.body = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 6))
            self.head = nn.Linear(6, 11, bias=False)
            self.head.weight = self.emb.weight
            self.register_buffer("steps", torch.tensor(7))

    return Tied


def _same_state(torch, a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype, k
        assert torch.equal(sa[k], sb[k]), k


@pytest.fixture
def tj():
    require("torch")
    import jtree.torch  # noqa: PLC0415

    return jtree.torch


def test_import_jtree_does_not_import_torch():
    code = ("import sys, numpy as np, jtree, tempfile, os\n"
            "p = os.path.join(tempfile.mkdtemp(), 'a.jtree')\n"
            "jtree.save({'w': np.ones(3)}, p); jtree.load(p)\n"
            "assert 'torch' not in sys.modules, 'jtree imported torch'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_save_model_load_model_round_trip_keeps_ties(torch, tj, path):
    Tied = _tied_model_class(torch)
    torch.manual_seed(0)
    src = Tied()
    stats = tj.save_model(src, path, metadata={"format": "pt"})
    # Seven names, six tensors: the tied weight is stored once.
    assert len(src.state_dict()) == 7 and stats.leaves == 6
    assert jtree.open(path).metadata == {"format": "pt"}
    dst = Tied()
    weight = dst.body[0].weight  # an optimizer would hold this object
    missing, unexpected = tj.load_model(dst, path)
    assert (missing, unexpected) == ([], [])
    _same_state(torch, src, dst)
    assert dst.body[0].weight is weight  # copied in place: references stay valid
    assert dst.head.weight is dst.emb.weight
    # load_file: the tied tensor comes back as one tensor under both names.
    tensors = tj.load_file(path)
    assert tensors["head.weight"].data_ptr() == tensors["emb.weight"].data_ptr()
    assert tensors["steps"].item() == 7
    assert tj.load_file(path, map_location="cpu")["steps"].item() == 7


def test_load_model_fills_a_tie_from_one_name(torch, tj, path):
    """A file holding one name of a tie (safetensors' save_model drops the others) fills
    every name of it and reports none missing."""
    Tied = _tied_model_class(torch)
    src = Tied()
    sd = src.state_dict()
    del sd["head.weight"]
    tj.save_file(sd, path)
    dst = Tied()
    assert tj.load_model(dst, path) == ([], [])
    assert torch.equal(dst.head.weight, src.emb.weight)
    assert dst.head.weight is dst.emb.weight


def test_load_model_into_a_meta_model_materializes_it(torch, tj, path):
    Tied = _tied_model_class(torch)
    src = Tied()
    tj.save_model(src, path)
    with torch.device("meta"):
        dst = Tied()
    assert dst.emb.weight.device.type == "meta"
    assert tj.load_model(dst, path) == ([], [])
    for name, t in list(dst.named_parameters()) + list(dst.named_buffers()):
        assert t.device.type == "cpu", name
    for _, p in dst.named_parameters():
        assert isinstance(p, torch.nn.Parameter) and p.requires_grad
    _same_state(torch, src, dst)
    # Tied again: one Parameter under both names (assign gave each a new one).
    assert dst.head.weight is dst.emb.weight
    assert len(list(dst.parameters())) == len(list(src.parameters()))
    # The model trains: a backward pass reaches the tied weight once.
    out = dst.head(dst.body(dst.emb(torch.tensor([1, 2]))))
    out.sum().backward()
    assert dst.emb.weight.grad is not None


@pytest.mark.parametrize("kw", [{"device": "cpu"}, {"map_location": "cpu"}, {}])
def test_load_model_meta_with_device(torch, tj, path, kw):
    Tied = _tied_model_class(torch)
    src = Tied()
    tj.save_model(src, path)
    with torch.device("meta"):
        dst = Tied()
    tj.load_model(dst, path, **kw)
    _same_state(torch, src, dst)


def test_load_model_in_small_batches(torch, tj, path, monkeypatch):
    """Tensors are read a batch at a time (here one tensor each): the same model comes out,
    tied weights included, on a CPU model and a meta one."""
    monkeypatch.setattr(tj, "_BATCH_BYTES", 64)
    assert len(tj._batches({"a": torch.zeros(4), "b": torch.zeros(40), "c": torch.zeros(1)},
                           ["a", "b", "c"])) == 3
    Tied = _tied_model_class(torch)
    src = Tied()
    tj.save_model(src, path)
    dst = Tied()
    assert tj.load_model(dst, path) == ([], [])
    _same_state(torch, src, dst)
    with torch.device("meta"):
        dst = Tied()
    tj.load_model(dst, path)
    _same_state(torch, src, dst)
    assert dst.head.weight is dst.emb.weight


def test_load_model_strict_missing_and_unexpected(torch, tj, path):
    Tied = _tied_model_class(torch)
    src = Tied()
    sd = src.state_dict()
    del sd["body.0.bias"]
    sd["extra.weight"] = torch.zeros(2)
    tj.save_file(sd, path)
    dst = Tied()
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    with pytest.raises(jtree.InvalidArgumentError,
                       match=r"missing key\(s\) 'body.0.bias'; unexpected key\(s\) "
                             r"'extra.weight'"):
        tj.load_model(dst, path)
    for k, v in dst.state_dict().items():  # nothing was loaded
        assert torch.equal(v, before[k]), k
    missing, unexpected = tj.load_model(dst, path, strict=False)
    assert missing == ["body.0.bias"] and unexpected == ["extra.weight"]
    assert torch.equal(dst.body[0].weight, src.body[0].weight)
    assert torch.equal(dst.body[0].bias, before["body.0.bias"])  # left as it was


def test_load_model_casts_to_the_models_dtype_and_checks_shapes(torch, tj, path):
    Tied = _tied_model_class(torch)
    src = Tied()
    tj.save_model(src, path)
    dst = Tied().to(torch.float64)
    tj.load_model(dst, path)
    assert dst.body[0].weight.dtype == torch.float64
    assert torch.equal(dst.body[0].weight, src.body[0].weight.double())
    wrong = torch.nn.Sequential(torch.nn.Linear(6, 9))
    tj.save_model(torch.nn.Sequential(torch.nn.Linear(6, 8)), path)
    before = wrong[0].weight.clone()
    with pytest.raises(jtree.InvalidArgumentError, match=r"'0.weight'.*\(8, 6\).*\(9, 6\)"):
        tj.load_model(wrong, path)
    assert torch.equal(wrong[0].weight, before)  # checked before anything was loaded


def test_load_model_refuses_what_is_not_a_state_dict(torch, tj, path):
    jtree.save([np.ones(2)], path)
    with pytest.raises(jtree.InvalidArgumentError, match="not a dict of tensors"):
        tj.load_model(torch.nn.Linear(2, 2), path)
    with pytest.raises(jtree.InvalidArgumentError, match="torch.nn.Module"):
        tj.load_model({"w": 1}, path)
    with pytest.raises(jtree.InvalidArgumentError, match="decided by the model"):
        tj.load_model(torch.nn.Linear(2, 2), path, framework="numpy")


def _rope_model_class(torch, how):
    """A model with a rotary-embedding-like module whose ``inv_freq`` is a non-persistent
    buffer (no state dict holds it), computed at construction. ``how`` says what can compute
    it again: "init_weights" (the model's ``_init_weights(module)``, as transformers' models
    have), "reset" (the module's ``reset_parameters()``), "bad_reset" (a reset_parameters that
    leaves it unset) or "none"."""
    nn = torch.nn

    def inv_freq():
        return 1.0 / (10000 ** (torch.arange(0, 8, 2, dtype=torch.float32) / 8))

    class Rope(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("inv_freq", inv_freq(), persistent=False)

        def forward(self, x):
            return x * self.inv_freq.sum()

    if how in ("reset", "bad_reset"):
        Rope.reset_parameters = (lambda self: self.inv_freq.copy_(inv_freq())) \
            if how == "reset" else (lambda self: None)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)
            self.rope = Rope()

        def forward(self, x):
            return self.rope(self.proj(x))

    if how == "init_weights":
        def _init_weights(self, module):
            if isinstance(module, Rope):
                module.inv_freq.copy_(inv_freq())
            elif isinstance(module, nn.Linear):
                module.weight.fill_(0.5)
        Model._init_weights = _init_weights
    return Model


def _on_meta(model):
    return [n for n, t in list(model.named_parameters()) + list(model.named_buffers())
            if t.is_meta]


@pytest.mark.parametrize("how", ["init_weights", "reset"])
def test_load_model_meta_recomputes_non_persistent_buffers(torch, tj, path, how):
    """A model built on the meta device has its non-persistent buffers on meta too (the file
    never holds them): the module's own way recomputes them, and the model runs."""
    Model = _rope_model_class(torch, how)
    src = Model()
    tj.save_model(src, path)
    with torch.device("meta"):
        dst = Model()
    assert _on_meta(dst) == ["proj.weight", "proj.bias", "rope.inv_freq"]
    assert tj.load_model(dst, path) == ([], [])
    assert _on_meta(dst) == []
    assert torch.equal(dst.rope.inv_freq, src.rope.inv_freq)
    assert torch.equal(dst.proj.weight, src.proj.weight)  # loaded, not re-initialized
    x = torch.ones(2, 4)
    assert torch.equal(dst(x), src(x))


@pytest.mark.parametrize("how", ["none", "bad_reset"])
def test_load_model_meta_buffer_nothing_recomputes(torch, tj, path, how):
    """A non-persistent buffer on meta that nothing recomputes: strict=True says so, naming
    it, before anything is read; strict=False zero-fills it and lists it in missing."""
    Model = _rope_model_class(torch, how)
    tj.save_model(Model(), path)
    with torch.device("meta"):
        dst = Model()
    if how == "none":
        with pytest.raises(jtree.InvalidArgumentError,
                           match=r"'rope.inv_freq' is on the meta device and not in the file.*"
                                 r"nothing here recomputes it.*include_buffers=False"):
            tj.load_model(dst, path)
        assert _on_meta(dst) == ["proj.weight", "proj.bias", "rope.inv_freq"]  # unchanged
    else:  # a reset_parameters that does not set it is found out after the load
        with pytest.raises(jtree.InvalidArgumentError, match=r"'rope.inv_freq'.*zero-filled"):
            tj.load_model(dst, path)
        assert _on_meta(dst) == []
        with torch.device("meta"):
            dst = Model()
    assert tj.load_model(dst, path, strict=False) == (["rope.inv_freq"], [])
    assert _on_meta(dst) == []
    assert torch.equal(dst.rope.inv_freq, torch.zeros(4))


def test_load_model_meta_never_resets_what_the_file_filled(torch, tj, path):
    """A module with submodules is not re-initialized for its own buffer: its
    reset_parameters would reset the submodules' loaded weights too."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("scale", torch.ones(3), persistent=False)

        def reset_parameters(self):
            self.lin.reset_parameters()
            self.scale.fill_(1.0)

    src = Block()
    tj.save_model(src, path)
    with torch.device("meta"):
        dst = Block()
    with pytest.raises(jtree.InvalidArgumentError,
                       match=r"'scale' is on the meta device.*Block can be re-initialized, but "
                             r"not without resetting what the file fills"):
        tj.load_model(dst, path)
    assert tj.load_model(dst, path, strict=False) == (["scale"], [])
    assert torch.equal(dst.lin.weight, src.lin.weight) and torch.equal(dst.scale, torch.zeros(3))


def test_load_model_meta_missing_keys_strict_false(torch, tj, path):
    """strict=False leaves nothing on meta either: a module none of whose tensors the file
    holds is re-initialized (reset_parameters, or the model's _init_weights), anything else
    zero-filled; both are listed in missing."""
    nn = torch.nn
    src = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    tj.save_file({"0.weight": src[0].weight.detach()}, path)
    with torch.device("meta"):
        dst = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    missing, unexpected = tj.load_model(dst, path, strict=False)
    assert (missing, unexpected) == (["0.bias", "1.weight", "1.bias"], [])
    assert _on_meta(dst) == []
    assert torch.equal(dst[0].weight, src[0].weight)
    assert torch.equal(dst[0].bias, torch.zeros(4))  # its module has a loaded weight
    assert dst[1].weight.abs().sum() > 0  # nn.Linear.reset_parameters
    Model = _rope_model_class(torch, "init_weights")
    tj.save_file({"proj.bias": Model().proj.bias.detach()}, path)
    with torch.device("meta"):
        dst = Model()
    assert tj.load_model(dst, path, strict=False) == (["proj.weight"], [])
    assert torch.equal(dst.proj.weight, torch.zeros(4, 4))  # not its whole module: zeros
    with torch.device("meta"):
        dst = Model()
    tj.save_file({}, path)
    assert tj.load_model(dst, path, strict=False) == (["proj.weight", "proj.bias"], [])
    assert torch.equal(dst.proj.weight, torch.full((4, 4), 0.5))  # the model's _init_weights


def test_save_model_refuses_meta_tensors(torch, tj, path):
    with torch.device("meta"):
        m = torch.nn.Linear(2, 2)
    with pytest.raises(jtree.InvalidArgumentError, match="weight.*meta"):
        tj.save_model(m, path)


def test_optimizer_checkpoint_round_trip(torch, path):
    """A whole training checkpoint, as torch.save would take it, without pickle: model,
    Adam state (int keys, tuples, None flags), epoch, and every RNG state."""
    torch.manual_seed(1)
    model = _tied_model_class(torch)()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.head(model.body(model.emb(torch.tensor([3, 4])))).sum().backward()
    opt.step()
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
            "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(),
            "python_rng": random.getstate()}
    jtree.save(ckpt, path)
    back = jtree.load(path, framework="torch")
    model2 = _tied_model_class(torch)()
    model2.load_state_dict(back["model"])
    opt2 = torch.optim.Adam(model2.parameters(), lr=5.0)
    opt2.load_state_dict(back["optimizer"])
    assert opt2.param_groups[0]["lr"] == 1e-3
    assert opt2.param_groups[0]["betas"] == (0.9, 0.999)
    s1, s2 = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert list(s1) == list(s2)
    for k in s1:
        for name in s1[k]:
            assert torch.equal(s1[k][name], s2[k][name]), (k, name)
    assert back["epoch"] == 3


def test_rng_states_round_trip(torch, path):
    gen_pcg = np.random.default_rng(5)
    gen_mt = np.random.Generator(np.random.MT19937(6))
    torch.manual_seed(2)
    np.random.seed(3)
    random.seed(4)
    states = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(),
              "python": random.getstate(), "pcg64": gen_pcg.bit_generator.state,
              "mt19937": gen_mt.bit_generator.state,
              "torch_gen": torch.Generator().manual_seed(9).get_state()}
    expect = (torch.rand(3), np.random.rand(3), random.random(), gen_pcg.random(3),
              gen_mt.random(3))
    jtree.save(states, path)
    for framework in ("numpy", "torch"):
        back = jtree.load(path, framework=framework)
        torch.set_rng_state(torch.as_tensor(back["torch"]))
        np.random.set_state(back["numpy"])
        random.setstate(back["python"])
        g1 = np.random.default_rng()
        g1.bit_generator.state = back["pcg64"]
        g2 = np.random.Generator(np.random.MT19937())
        g2.bit_generator.state = back["mt19937"]
        got = (torch.rand(3), np.random.rand(3), random.random(), g1.random(3), g2.random(3))
        assert torch.equal(got[0], expect[0])
        for a, b in zip(got[1:], expect[1:]):
            np.testing.assert_array_equal(a, b)
        gen = torch.Generator()
        gen.set_state(torch.as_tensor(back["torch_gen"]))
        assert torch.equal(torch.rand(2, generator=gen),
                           torch.rand(2, generator=torch.Generator().manual_seed(9)))


def test_torch_size_and_dtype_round_trip(torch, path):
    dtypes = [torch.float32, torch.bfloat16, torch.float16, torch.int8, torch.uint8, torch.bool,
              torch.complex64, torch.float8_e4m3fn, torch.int64]
    tree = {"shape": torch.Size([2, 3]), "empty": torch.Size([]), "dtypes": dtypes,
            "meta": {"w": (torch.Size([4]), torch.float32)},
            "devices": [torch.device("cpu"), torch.device("cuda", 1), torch.device("meta")]}
    jtree.save(tree, path)
    back = jtree.load(path, framework="torch")
    assert type(back["shape"]) is torch.Size and back["shape"] == torch.Size([2, 3])
    assert type(back["empty"]) is torch.Size and back["empty"] == torch.Size([])
    assert back["dtypes"] == dtypes and all(isinstance(d, torch.dtype) for d in back["dtypes"])
    assert back["meta"]["w"] == (torch.Size([4]), torch.float32)
    assert back["devices"] == [torch.device("cpu"), torch.device("cuda:1"), torch.device("meta")]
    assert all(type(d) is torch.device for d in back["devices"])
    # Other frameworks (and a process without torch) get the plain Python values.
    plain = jtree.load(path)
    assert type(plain["shape"]) is tuple and plain["shape"] == (2, 3)
    assert plain["dtypes"][:2] == ["float32", "bfloat16"]
    assert plain["devices"] == ["cpu", "cuda:1", "meta"]
    spec = jtree.load_pytreedef(path)
    assert isinstance(spec["shape"], tuple) and len(spec["shape"]) == 2
    code = ("import sys, jtree\n"
            f"t = jtree.load({path!r})\n"
            "assert t['shape'] == (2, 3) and t['dtypes'][1] == 'bfloat16', t\n"
            "assert 'torch' not in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_unknown_torch_dtype_in_a_file_is_a_clear_error(torch, path):
    class Fake:
        pass

    jtree.register_pytree_leaf_serialization(Fake, serialized_name="torch.dtype",
                                             serialize_leaf=lambda x: "no_such_dtype",
                                             deserialize_leaf=lambda b: Fake())
    from jtree import _registry  # noqa: PLC0415

    try:
        jtree.save({"d": Fake()}, path)
    finally:
        entry = _registry._leaves_by_name.pop("torch.dtype")
        _registry._leaves_by_type.pop(entry.cls)
    with pytest.raises(jtree.NotSupportedError, match="at 'd': .*'no_such_dtype'"):
        jtree.load(path, framework="torch")
    assert jtree.load(path) == {"d": "no_such_dtype"}


def test_a_bad_torch_size_in_a_file_is_a_clear_error(torch, path):
    class Fake:
        pass

    from jtree import _registry  # noqa: PLC0415

    for children in (["a", 1], [1 << 70]):
        jtree.register_pytree_node_serialization(
            Fake, serialized_name="torch.Size", serialize_auxdata=lambda aux: b"",
            deserialize_auxdata=lambda b: None, flatten_func=lambda x, c=children: (c, None),
            unflatten_func=lambda aux, ch: Fake())
        try:
            jtree.save({"s": Fake()}, path)
        finally:
            entry = _registry._nodes_by_name.pop("torch.Size")
            _registry._nodes_by_type.pop(entry.cls)
        with pytest.raises(jtree.CorruptionError, match="at 's': .*torch.Size"):
            jtree.load(path, framework="torch")
        assert jtree.load(path)["s"] == tuple(children)


# ---- device= / map_location= ------------------------------------------------------------------

def test_load_device_and_map_location(torch, path):
    jtree.save({"w": np.arange(6, dtype=np.float32).reshape(2, 3),
                "b": torch.ones(3, dtype=torch.bfloat16), "n": 5}, path)
    for kw in ({"device": "cpu"}, {"map_location": "cpu"}, {"device": torch.device("cpu")},
               {"map_location": torch.device("cpu"), "framework": "numpy"}):
        t = jtree.load(path, **kw)  # device= implies framework="torch"
        assert isinstance(t["w"], torch.Tensor) and t["w"].device.type == "cpu", kw
        assert t["b"].dtype == torch.bfloat16 and t["n"] == 5
        assert torch.equal(t["w"], torch.arange(6, dtype=torch.float32).reshape(2, 3))
    fut = jtree.nonblocking_load(path, device="cpu")
    assert isinstance(fut.result()["w"], torch.Tensor)


def test_load_device_errors(torch, path):
    jtree.save({"w": np.ones(3, np.float32)}, path)
    with pytest.raises(jtree.InvalidArgumentError, match="not both"):
        jtree.load(path, device="cpu", map_location="cpu")
    with pytest.raises(jtree.InvalidArgumentError, match="meta.*throw the loaded data away"):
        jtree.load(path, device="meta")
    with pytest.raises(jtree.InvalidArgumentError, match="dict and function forms"):
        jtree.load(path, map_location={"cuda:0": "cpu"})
    with pytest.raises(jtree.InvalidArgumentError, match="not a torch device"):
        jtree.load(path, device="nowhere")
    with pytest.raises(jtree.InvalidArgumentError, match="shardings"):
        jtree.load(path, device="cpu", framework="jax")
    with pytest.raises(jtree.InvalidArgumentError, match="not both"):
        jtree.open(path, device="cpu", map_location="cpu")


def test_load_device_cuda(torch, path):
    jtree.save({"w": np.ones(3, np.float32)}, path)
    if torch.cuda.is_available():
        t = jtree.load(path, device="cuda:0")
        assert t["w"].device == torch.device("cuda:0")
        assert torch.equal(t["w"].cpu(), torch.ones(3))
    else:
        with pytest.raises(jtree.NotSupportedError, match="cuda.*torch.cuda is not available"):
            jtree.load(path, device="cuda")
        with pytest.raises(jtree.NotSupportedError, match="torch.cuda is not available"):
            jtree.open(path, device="cuda:0")


def test_meta_targets_are_materialized_never_returned_as_meta(torch, path):
    w = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    jtree.save({"w": w, "b": torch.ones(4, dtype=torch.bfloat16)}, path)
    target = {"w": torch.empty(3, 4, device="meta"),
              "b": torch.empty(4, dtype=torch.float32, device="meta")}
    for kw in ({}, {"device": "cpu"}, {"map_location": "cpu"}):
        for how in ("pytree", "out"):
            got = (jtree.load(path, target, **kw) if how == "pytree"
                   else jtree.load(path, out=target, **kw))
            assert got["w"].device.type == "cpu" and got["b"].device.type == "cpu", (kw, how)
            assert torch.equal(got["w"], w)
            assert got["b"].dtype == torch.float32  # the target's dtype
            assert torch.equal(got["b"], torch.ones(4))
    # A state_dict of a model built on the meta device, as the issue found it.
    with torch.device("meta"):
        m = torch.nn.Linear(4, 3)
    jtree.save({"weight": w, "bias": torch.zeros(3)}, path)
    sd = jtree.load(path, m.state_dict())
    assert sd["weight"].device.type == "cpu" and torch.equal(sd["weight"], w)
    # A CPU out= target is still filled in place.
    cpu = {"w": torch.zeros(3, 4), "b": torch.zeros(4)}
    jtree.save({"w": w, "b": torch.ones(4)}, path)
    got = jtree.load(path, out=cpu)
    assert got["w"] is cpu["w"] and torch.equal(cpu["w"], w)


def test_lazy_slices_with_device(torch, path):
    a = np.arange(40, dtype=np.float32).reshape(10, 4)
    jtree.save({"a": a}, path)
    with jtree.open(path, device="cpu") as f:
        s = f["a"][2:5]
        assert isinstance(s, torch.Tensor) and torch.equal(s, torch.from_numpy(a[2:5]))
    with jtree.open(path) as f:
        assert isinstance(f["a"][0], np.ndarray)
        s = f["a"].get((slice(1, 3), 1), device="cpu")
        assert isinstance(s, torch.Tensor) and torch.equal(s, torch.from_numpy(a[1:3, 1]))
        s = f["a"].get(0, map_location=torch.device("cpu"))
        assert isinstance(s, torch.Tensor)
        whole = f["a"].read(device="cpu")  # whole reads take load()'s options
        assert isinstance(whole, torch.Tensor) and torch.equal(whole, torch.from_numpy(a))
        assert isinstance(f.root.load(map_location="cpu")["a"], torch.Tensor)
        with pytest.raises(jtree.InvalidArgumentError, match="framework='jax'"):
            f["a"].get(0, framework="jax", device="cpu")
        if not torch.cuda.is_available():
            with pytest.raises(jtree.NotSupportedError, match="torch.cuda is not available"):
                f["a"].get(0, device="cuda")
