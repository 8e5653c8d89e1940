"""PyTorch models and state dicts in .jtree files, in the convention of ``safetensors.torch``.

    import jtree.torch
    jtree.torch.save_model(model, "model.jtree")
    missing, unexpected = jtree.torch.load_model(model, "model.jtree")
    jtree.torch.save_file({"w": w, "b": b}, "tensors.jtree")
    tensors = jtree.torch.load_file("tensors.jtree", device="cpu")

A model's state dict is saved as one flat dict of tensors (keys such as ``"0.weight"``). Tied
weights -- parameters that are one tensor under several names, such as a language model's
embedding and output projection -- are stored once under every name and loaded back tied
(``save_model`` needs no ``safetensors``-style removal of the duplicate names, and a file that
holds only one of the names loads into both).

``import jtree`` never imports torch; this module does.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import torch

from . import _placement
from ._api import WriteStats, load, open, save
from ._errors import InvalidArgumentError, error
from ._file import File

__all__ = ["save_model", "load_model", "save_file", "load_file"]

PathLike = Union[str, "os.PathLike[str]"]


def save_model(model: torch.nn.Module, path: PathLike, *,
               metadata: Optional[Mapping[str, Union[str, bytes]]] = None,
               **save_options: Any) -> WriteStats:
    """Saves ``model.state_dict()`` as a .jtree file (a flat dict of tensors).

    Tied parameters (one tensor under several names) are stored once and keep every name.
    Tensors on an accelerator are copied to host memory as they are written; tensors on the
    meta device hold no data and are refused (:class:`jtree.InvalidArgumentError` naming the
    key). ``metadata`` is stored as user metadata (:attr:`jtree.File.metadata`);
    ``save_options`` are those of :func:`jtree.save` (``compression``, ``level``,
    ``chunk_bytes``...). Returns the :class:`jtree.WriteStats`.
    """
    if not isinstance(model, torch.nn.Module):
        raise InvalidArgumentError(f"save_model: model must be a torch.nn.Module, not a "
                                   f"{type(model).__qualname__}")
    return save(dict(model.state_dict()), path, metadata=metadata, **save_options)


def load_model(model: torch.nn.Module, path: Union[PathLike, File], *, strict: bool = True,
               device: Any = None, map_location: Any = None,
               **load_options: Any) -> Tuple[List[str], List[str]]:
    """Loads a state dict saved by :func:`save_model` (or any .jtree file whose root is a
    flat dict of tensors, such as one converted from safetensors) into ``model``.

    Returns ``(missing, unexpected)``: the model's keys the file lacks, and the file's keys
    the model lacks. With ``strict=True`` (default) either being non-empty is a
    :class:`jtree.InvalidArgumentError` listing them, raised before anything is read, with the
    model unchanged. Of tied parameters, a file needs only one name: the others are
    filled through the tie and not reported missing.

    Each tensor is read straight at the dtype and shape of the model's own (a dtype is cast;
    another shape is an error naming the key, raised before the model is changed), then
    copied into the model's parameters and buffers in place (``load_state_dict``), so
    optimizers holding them stay valid. Tensors are read in batches of about 256 MiB, each
    copied before the next is read: the load needs about that much memory besides the
    model's, and a read error (a damaged file) can leave the model partly loaded.
    Parameters on the meta device (a model built under ``torch.device("meta")``) are
    materialized instead: their tensors are created on ``device`` (alias ``map_location``;
    default the CPU) and assigned to the model, tied ones to every name of their tie.
    ``device`` places only those: parameters already on a device are loaded onto it. For a
    CUDA device the tensors are read into host memory and then moved (``device="cuda"``
    raises :class:`jtree.NotSupportedError` when ``torch.cuda`` is not available).

    No tensor of the model is left on the meta device. Its meta tensors the file does not
    fill -- non-persistent buffers, which no state dict holds (a rotary embedding's
    ``inv_freq``), and under ``strict=False`` missing keys -- are created on ``device`` and
    recomputed by the model's own re-initialization where a module none of whose tensors the
    file holds has one: ``model._init_weights(module)`` (transformers' models: ``inv_freq``
    recomputed from the config, as ``from_pretrained`` does) or ``module.reset_parameters()``.
    The rest are, with ``strict=True``, an :class:`jtree.InvalidArgumentError` naming them
    (raised before anything is read, unless a re-initialization left one unset: then after
    the load, with those zero-filled); with ``strict=False`` zero-filled and listed in
    ``missing`` (as are missing keys, re-initialized or not).
    ``load_options`` are those of :func:`jtree.load` (``verify``, ``threads``, ``mmap``...).
    """
    if not isinstance(model, torch.nn.Module):
        raise InvalidArgumentError(f"load_model: model must be a torch.nn.Module, not a "
                                   f"{type(model).__qualname__}")
    dev = _placement.resolve("torch", device, map_location).device
    for k in ("framework", "pytree", "out", "keys", "shardings"):
        if k in load_options:
            raise InvalidArgumentError(f"load_model: {k}= is decided by the model")
    f = path if isinstance(path, File) else open(path)
    try:
        return _load_into(model, f, strict, dev, load_options)
    finally:
        if f is not path:
            f.close()


def _load_into(model: torch.nn.Module, f: File, strict: bool, device: Any,
               load_options: Dict[str, Any]) -> Tuple[List[str], List[str]]:
    root = f.root
    if not (hasattr(root, "kind") and root.kind in ("dict", "OrderedDict")):
        raise error(InvalidArgumentError, f.name, "",
                    "load_model: the file's root is not a dict of tensors (a state dict); load "
                    "it with jtree.load and pick the state dict out")
    file_keys = [k for k in root.keys() if isinstance(k, str)]
    in_file = set(file_keys)
    # keep_vars: the Parameter objects themselves, so tied parameters are one object.
    entries = model.state_dict(keep_vars=True)
    groups: Dict[int, List[str]] = {}
    for k, v in entries.items():
        groups.setdefault(id(v) if isinstance(v, torch.Tensor) else id(k), []).append(k)
    missing: List[str] = []
    sources: Dict[str, List[str]] = {}  # the key read -> every name of its tie
    for names in groups.values():
        present = [n for n in names if n in in_file]
        if present:
            sources[present[0]] = names
        else:
            missing.extend(names)
    position = {k: i for i, k in enumerate(entries)}
    missing.sort(key=position.__getitem__)
    unexpected = [k for k in file_keys if k not in entries]
    # The model's meta tensors the file will not fill (non-persistent buffers, which no state
    # dict holds, and missing keys), by module: each is re-initialized or reported below.
    filled = {n for names in sources.values() for n in names}
    left = _meta_left(model, filled)
    in_missing = set(missing)
    stuck = [n for mod, names in left.values() if _reinit(model, mod, names) is None
             for n in names if n not in in_missing]
    if strict and (missing or unexpected or stuck):
        parts = []
        if missing:
            parts.append(f"missing key(s) {_some(missing)}")
        if unexpected:
            parts.append(f"unexpected key(s) {_some(unexpected)}")
        if stuck:
            parts.append(_stuck_message(model, left, stuck))
        then = ("; what stays on the meta device is then zero-filled and listed in missing"
                if stuck else "")
        raise error(InvalidArgumentError, f.name, "",
                    f"load_model into {type(model).__qualname__}: {'; '.join(parts)} "
                    f"(strict=False loads the keys both have{then})")

    # Shapes first, so that a wrong one is reported before the model is changed.
    if not load_options.get("pad_truncate"):
        for k in sources:
            v, leaf = entries[k], root[k]
            if isinstance(v, torch.Tensor) and hasattr(leaf, "shape") and \
                    tuple(leaf.shape) != tuple(v.shape):
                raise error(InvalidArgumentError, f.name, k,
                            f"load_model: the file holds shape {tuple(leaf.shape)}; the model "
                            f"has {tuple(v.shape)} (pad_truncate=True pads or truncates)")
    on_meta = {k for k in sources
               if isinstance(entries[k], torch.Tensor) and entries[k].device.type == "meta"}
    # The model's own tensors are the targets: their dtype, shape and device (meta ones give
    # shape and dtype; jtree.load creates their data on `device`). Read in batches, each
    # copied into the model before the next is read: the memory a load needs besides the
    # model is about one batch, not a second model.
    for batch in _batches(entries, list(sources)):
        target = {k: (entries[k] if isinstance(entries[k], torch.Tensor) else True)
                  for k in batch}
        with torch.no_grad():
            loaded = load(f, target, framework="torch", device=device, **load_options)
        copy = {k: v for k, v in loaded.items() if k not in on_meta}
        if copy:
            model.load_state_dict(copy, strict=False)
        assign = {k: v for k, v in loaded.items() if k in on_meta}
        if assign:
            model.load_state_dict(assign, strict=False, assign=True)
        del loaded, copy, assign
    for k in on_meta:  # assign made a new Parameter under one name: tie the others to it
        new = _get(model, k)
        for other in sources[k]:
            if other != k:
                _set(model, other, new)
    zeroed = _materialize_left(model, left, device)
    if strict and zeroed:  # a re-initialization that left NaN behind (checked above: rare)
        raise error(InvalidArgumentError, f.name, "",
                    f"load_model into {type(model).__qualname__}: "
                    f"{_stuck_message(model, left, zeroed)}; the model is loaded, and these "
                    f"are zero-filled")
    missing += [n for n in zeroed if n not in in_missing]
    return missing, unexpected


def _meta_left(model: torch.nn.Module,
               filled: set) -> Dict[str, Tuple[torch.nn.Module, List[str]]]:
    """The model's tensors on the meta device that the load does not fill (their names not in
    ``filled``), by the name of the module that owns them: {prefix: (module, [names])}."""
    left: Dict[str, Tuple[torch.nn.Module, List[str]]] = {}
    for prefix, mod in model.named_modules(remove_duplicate=False):
        for name, t in list(mod._parameters.items()) + list(mod._buffers.items()):
            full = f"{prefix}.{name}" if prefix else name
            if isinstance(t, torch.Tensor) and t.is_meta and full not in filled:
                left.setdefault(prefix, (mod, []))[1].append(full)
    return left


def _reinit(model: torch.nn.Module, mod: torch.nn.Module, names: List[str]) -> Optional[str]:
    """How ``mod``'s tensors can be computed again, where ``names`` (its tensors left on the
    meta device) are every tensor it owns and it has no submodules, so that nothing the file
    filled can be reset by it: transformers' models re-initialize a module through
    ``model._init_weights(module)`` (a rotary embedding's ``inv_freq`` recomputed from the
    config, as ``from_pretrained`` does it); a torch.nn layer through its
    ``reset_parameters()``. None when neither applies."""
    own = [t for t in list(mod._parameters.values()) + list(mod._buffers.values())
           if t is not None]
    if len(own) != len(names) or next(mod.children(), None) is not None:
        return None
    if callable(getattr(model, "_init_weights", None)):
        return "_init_weights"
    if callable(getattr(mod, "reset_parameters", None)):
        return "reset_parameters"
    return None


def _stuck_message(model: torch.nn.Module,
                   left: Dict[str, Tuple[torch.nn.Module, List[str]]], names: List[str]) -> str:
    """Why ``names`` stay on the meta device, and what recomputes them."""
    owners = {}
    for mod, ns in left.values():
        for n in ns:
            owners[n] = mod
    has_path = sorted({type(owners[n]).__qualname__ for n in names
                       if callable(getattr(owners[n], "reset_parameters", None))
                       or callable(getattr(model, "_init_weights", None))})
    return (f"{_some(names)} {'is' if len(names) == 1 else 'are'} on the meta device and not in "
            f"the file (a state dict leaves non-persistent buffers out), and nothing here "
            f"recomputes {'it' if len(names) == 1 else 'them'}"
            + (f" ({', '.join(has_path)} can be re-initialized, but not without resetting "
               f"what the file fills: its other tensors or its submodules)" if has_path
               else "")
            + "; build the model with its buffers on a real device (e.g. "
              "accelerate.init_empty_weights(include_buffers=False))")


def _materialize_left(model: torch.nn.Module,
                      left: Dict[str, Tuple[torch.nn.Module, List[str]]],
                      device: Any) -> List[str]:
    """Moves every tensor in ``left`` off the meta device onto ``device`` (default the CPU):
    re-initialized where :func:`_reinit` finds a way, zero-filled otherwise. Returns the
    names zero-filled. Floating tensors are created NaN-filled before a re-initialization, so
    that one it did not set is caught and zero-filled instead."""
    target = torch.device("cpu") if device is None else torch.device(device)
    made: Dict[int, torch.Tensor] = {}  # one new tensor per meta tensor: ties stay tied
    zeroed: List[str] = []
    seen: Dict[int, List[str]] = {}  # a module under several names: done once (its zeroed)
    for prefix, (mod, names) in left.items():
        if id(mod) in seen:
            zeroed += [n for n in names if n.rpartition(".")[2] in seen[id(mod)]]
            continue
        how = _reinit(model, mod, names)
        mine = []
        for slot in (mod._parameters, mod._buffers):
            for name, t in list(slot.items()):
                if not (isinstance(t, torch.Tensor) and t.is_meta):
                    continue
                new = made.get(id(t))
                if new is None:
                    fill = float("nan") if how and t.is_floating_point() else 0
                    new = torch.full(t.shape, fill, dtype=t.dtype, device=target)
                    if isinstance(t, torch.nn.Parameter):
                        new = torch.nn.Parameter(new, requires_grad=t.requires_grad)
                    made[id(t)] = new
                slot[name] = new
                mine.append((name, new))
        if how is not None:
            with torch.no_grad():
                if how == "_init_weights":
                    model._init_weights(mod)
                else:
                    mod.reset_parameters()
        unset = []
        for name, t in mine:
            if how is None:
                unset.append(name)
            elif t.is_floating_point() and bool(t.isnan().any()):  # the re-init skipped it
                with torch.no_grad():
                    t.zero_()
                unset.append(name)
        seen[id(mod)] = unset
        zeroed += [f"{prefix}.{name}" if prefix else name for name in unset]
    return zeroed


# Bytes of tensors load_model reads before copying them into the model.
_BATCH_BYTES = 256 << 20


def _batches(entries: Mapping[str, Any], keys: List[str]) -> List[List[str]]:
    """``keys`` cut into runs of about _BATCH_BYTES of the model's tensors (one key alone may
    be more)."""
    out: List[List[str]] = []
    size = 0
    for k in keys:
        v = entries[k]
        n = v.numel() * v.element_size() if isinstance(v, torch.Tensor) else 0
        if out and out[-1] and size + n <= _BATCH_BYTES:
            out[-1].append(k)
            size += n
        else:
            out.append([k])
            size = n
    return out


def _some(keys: List[str], n: int = 10) -> str:
    shown = ", ".join(repr(k) for k in keys[:n])
    return shown + (f" and {len(keys) - n} more" if len(keys) > n else "")


def _owner(model: torch.nn.Module, key: str) -> Tuple[torch.nn.Module, str]:
    prefix, _, name = key.rpartition(".")
    return (model.get_submodule(prefix) if prefix else model), name


def _get(model: torch.nn.Module, key: str) -> Any:
    mod, name = _owner(model, key)
    return getattr(mod, name)


def _set(model: torch.nn.Module, key: str, value: Any) -> None:
    mod, name = _owner(model, key)
    if name in mod._parameters:
        mod._parameters[name] = value
    elif name in mod._buffers:
        mod._buffers[name] = value
    else:
        setattr(mod, name, value)


def save_file(tensors: Mapping[str, torch.Tensor], path: PathLike, *,
              metadata: Optional[Mapping[str, Union[str, bytes]]] = None,
              **save_options: Any) -> WriteStats:
    """Saves a dict of tensors (``safetensors.torch.save_file``'s form): :func:`jtree.save` of
    ``dict(tensors)`` with ``metadata`` as user metadata. Tensors that are one tensor under
    several names are stored once. Options are those of :func:`jtree.save`."""
    if not isinstance(tensors, Mapping):
        raise InvalidArgumentError(f"save_file: tensors must be a dict of tensors, not a "
                                   f"{type(tensors).__qualname__}")
    return save(dict(tensors), path, metadata=metadata, **save_options)


def load_file(path: Union[PathLike, File], device: Any = "cpu",
              **load_options: Any) -> Dict[str, Any]:
    """Loads a .jtree file as torch tensors on ``device`` (``safetensors.torch.load_file``'s
    form; default the CPU): :func:`jtree.load` with ``framework="torch"``. Tied tensors come
    back as one tensor under each name. ``map_location=`` may stand for ``device``. Options
    are those of :func:`jtree.load`."""
    if load_options.get("map_location") is not None and device == "cpu":
        device = None  # (the default gives way to the alias)
    return load(path, framework="torch", device=device, **load_options)
