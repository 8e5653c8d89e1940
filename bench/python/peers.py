"""One adapter per system under test: how it saves a tree, loads it back whole, loads one leaf,
reads the structure only, and reads a slice of one array -- each the way that system's users
do it, through its public API.

Trees are nested dicts of NumPy arrays (bf16 as ml_dtypes.bfloat16) and Python values
(int, float, bool, str). ``prepare`` turns one into the system's native form before the clock
starts (torch tensors for torch/safetensors, jax.Arrays for JAX/orbax). Systems with no tree
of their own (safetensors, NumPy, tensorstore, zarr) get a flat name per key path
("params/layers/0/attn/q") and a small JSON index of the non-array values and of the key
order, stored inside the file where the format allows (safetensors metadata, an npz member,
zarr attributes) and beside it otherwise. Systems without bf16 (NumPy files, h5py, zarr)
store bf16 as its raw 16-bit words (a uint16 view) and view them back on load.

Imports happen inside the adapters, so a child process loads only its own system's modules.
"""
from __future__ import annotations

import json
import math
import os
import shutil
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from workloads import BF16, KeyPath, get, iter_leaves

CHUNK_BYTES = 4 << 20  # chunk target where a peer needs one (same as jtree's default)


# ---- helpers ------------------------------------------------------------------------------------

def flat_name(path: KeyPath) -> str:
    return "/".join(path)


def unflatten(items: List[Tuple[KeyPath, Any]]) -> Dict[str, Any]:
    root: Dict[str, Any] = {}
    for path, v in items:
        t = root
        for k in path[:-1]:
            t = t.setdefault(k, {})
        t[path[-1]] = v
    return root


def split_tree(tree: Any) -> Tuple[List[Tuple[KeyPath, np.ndarray]], Dict[str, Any]]:
    """(arrays in order, index) where the index records the key order and non-array values."""
    arrays, order, values, dtypes = [], [], {}, {}
    for path, v in iter_leaves(tree):
        name = flat_name(path)
        order.append(name)
        if isinstance(v, np.ndarray):
            arrays.append((path, v))
            dtypes[name] = [v.dtype.name, list(v.shape)]
        else:
            values[name] = v
    return arrays, {"order": order, "values": values, "arrays": dtypes}


def join_tree(index: Dict[str, Any], get_array: Callable[[str], Any]) -> Dict[str, Any]:
    items = []
    for name in index["order"]:
        path = tuple(name.split("/"))
        items.append((path, index["values"][name] if name in index["values"] else get_array(name)))
    return unflatten(items)


def as_stored(a: np.ndarray) -> np.ndarray:
    """The array a format without bf16 stores: bf16 as its uint16 words."""
    return a.view(np.uint16) if a.dtype == BF16 else a


def as_loaded(a: np.ndarray, dtype_name: str) -> np.ndarray:
    return a.view(BF16) if dtype_name == "bfloat16" else a


def chunk_rows(shape: Tuple[int, ...], itemsize: int) -> Tuple[int, ...]:
    """A chunk shape of about CHUNK_BYTES, cut along the first axis."""
    if len(shape) == 0:
        return ()
    row = itemsize * math.prod(shape[1:])
    rows = max(1, min(shape[0], CHUNK_BYTES // max(1, row)))
    return (rows,) + tuple(shape[1:])


def touch(buf: np.ndarray) -> int:
    """Reads one byte of every 4 KiB page (faults a memory-mapped array in)."""
    flat = buf.reshape(-1).view(np.uint8) if buf.dtype != np.uint8 else buf.reshape(-1)
    return int(flat[::4096].sum()) if flat.size else 0


def path_size(p: str) -> int:
    if os.path.isdir(p):
        total = 0
        for dp, _dn, fn in os.walk(p):
            for f in fn:
                total += os.path.getsize(os.path.join(dp, f))
        return total
    return os.path.getsize(p)


def remove(p: str) -> None:
    if os.path.isdir(p):
        shutil.rmtree(p)
    elif os.path.exists(p):
        os.remove(p)


# ---- the adapters -------------------------------------------------------------------------------

class Peer:
    name = ""           # id used on the command line and in results
    label = ""          # what the tables say
    kind = "peer"       # jtree | peer | anchor | reference
    ext = ""            # file name suffix ("/" for a directory)
    ops = ("save", "load", "load_cold", "leaf", "struct", "slice")
    note = ""

    modules: Tuple[str, ...] = ()  # imported before the clock starts

    def setup(self) -> None:
        import importlib
        for m in self.modules:
            importlib.import_module(m)

    def prepare(self, tree: Any) -> Any:
        return tree

    def to_numpy(self, x: Any) -> Any:
        return x

    def materialize(self, out: Any) -> None:
        """Makes every loaded array resident (reads one byte per page): some systems hand back
        arrays backed by a lazy memory map, and a load is complete only when the data is in
        memory. Cheap for arrays that already are (about 1 ms per GiB)."""
        for _p, v in iter_leaves(out):
            if hasattr(v, "block_until_ready"):
                v.block_until_ready()
            elif hasattr(v, "shape") and not isinstance(v, (str, bytes)):
                a = self.to_numpy(v)
                if isinstance(a, np.ndarray):
                    touch(np.ascontiguousarray(a) if not a.flags.c_contiguous else a)


class Jtree(Peer):
    name, label, kind, ext = "jtree", "jtree (zstd, default)", "jtree", ".jtree"
    modules = ("jtree",)
    ops = ("save", "nbsave", "load", "load_cold", "leaf", "struct", "slice",
           "http_struct", "http_leaf", "http_slice", "http_load")
    save_opts: Dict[str, Any] = {}
    load_opts: Dict[str, Any] = {}
    note = "jtree.save(sync=False), jtree.load, load(pytree=partial dict), load_pytreedef, open()[...]"

    def save(self, tree, path):
        import jtree
        return jtree.save(tree, path, sync=False, **self.save_opts)

    def nbsave(self, tree, path):
        import jtree
        fut = jtree.nonblocking_save(tree, path, sync=False, **self.save_opts)
        return fut.result

    def load(self, path):
        import jtree
        return jtree.load(path, **self.load_opts)

    def leaf(self, path, key):
        import jtree
        mask: Any = True
        for k in reversed(key):
            mask = {k: mask}
        return get(jtree.load(path, mask, **self.load_opts), key)

    def struct(self, path):
        import jtree
        return jtree.load_pytreedef(path)

    def slice(self, path, key, rows):
        import jtree
        with jtree.open(path, **self.load_opts) as f:
            node = f
            for k in key:
                node = node[k]
            return node[rows[0]:rows[1]]

    # Over HTTP: the same calls on an open File, so that its I/O counters can be read.
    def http(self, op, url, key, rows):
        import jtree
        f = jtree.open(url, **self.load_opts)
        if op == "http_struct":
            out = f.structure()
        elif op == "http_load":
            out = jtree.load(f, **self.load_opts)
        elif op == "http_leaf":
            mask: Any = True
            for k in reversed(key):
                mask = {k: mask}
            out = jtree.load(f, mask, **self.load_opts)
        else:
            node = f
            for k in key:
                node = node[k]
            out = node[rows[0]:rows[1]]
        return out, f.io_stats()


class JtreeRaw(Jtree):
    name, label = "jtree-raw", "jtree (raw, compression=None)"
    save_opts = {"compression": None}
    ops = ("save", "load", "load_cold", "leaf", "struct", "slice")


class JtreeRawUnverified(JtreeRaw):
    name, label = "jtree-raw-nv", "jtree (raw, verify=False)"
    load_opts = {"verify": False}
    ops = ("save", "load", "leaf", "slice")  # (its save: the file its loads read)


class JtreeRawCopy(JtreeRaw):
    name, label = "jtree-raw-copy", "jtree (raw, mmap=False: copies)"
    load_opts = {"mmap": False}
    ops = ("save", "load", "leaf")


class JtreeRawTorch(JtreeRaw):
    """What a torch user meets: the same raw file loaded as torch tensors (views of the
    file's memory map, as the NumPy rows), against safetensors' torch API."""
    name, label = "jtree-raw-torch", "jtree (raw) as torch tensors"
    modules = ("jtree", "torch")
    load_opts = {"framework": "torch"}
    ops = ("save", "load")
    note = "jtree.load(path, framework='torch'), the file saved with compression=None"

    def to_numpy(self, x):
        return TorchSave().to_numpy(x)


class JtreeJax(Jtree):
    """What a JAX user meets: the default (zstd) file loaded as JAX arrays (on the process's one
    CPU device), against jax's pytree_serialization and orbax, which load JAX arrays too."""
    name, label = "jtree-jax", "jtree (zstd) as JAX arrays"
    modules = ("jtree",)
    load_opts = {"framework": "jax"}
    ops = ("save", "load", "leaf")
    note = "jtree.load(path, framework='jax'): JAX arrays on the one CPU device"

    def setup(self):
        _jax_env()
        Peer.setup(self)
        import jax
        jax.devices()  # the backend starts once per process, before the clock

    def to_numpy(self, x):
        return JaxPytree.to_numpy(self, x)


class JtreeOneThread(Jtree):
    name, label = "jtree-1t", "jtree (zstd, threads=1)"
    save_opts = {"threads": 1}
    load_opts = {"threads": 1}
    ops = ("save", "load")


class Safetensors(Peer):
    name, label, ext = "safetensors", "safetensors (torch)", ".safetensors"
    modules = ("torch", "safetensors", "safetensors.torch")
    note = "save_file / load_file / safe_open get_tensor, get_slice; values in __metadata__"

    def prepare(self, tree):
        return TorchSave().prepare(tree)

    def to_numpy(self, x):
        return TorchSave().to_numpy(x)

    def save(self, tree, path):
        from safetensors.torch import save_file
        flat, index = {}, {"order": [], "values": {}}
        for p, v in iter_leaves(tree):
            name = flat_name(p)
            index["order"].append(name)
            if hasattr(v, "dtype") and not isinstance(v, (int, float, bool, str)):
                flat[name] = v
            else:
                index["values"][name] = v
        save_file(flat, path, metadata={"bench_index": json.dumps(index)})

    def load(self, path):
        from safetensors import safe_open
        from safetensors.torch import load_file
        with safe_open(path, "pt") as f:
            index = json.loads(f.metadata()["bench_index"])
        t = load_file(path)
        return join_tree(index, t.__getitem__)

    def leaf(self, path, key):
        from safetensors import safe_open
        with safe_open(path, "pt") as f:
            return f.get_tensor(flat_name(key))

    def struct(self, path):
        from safetensors import safe_open
        with safe_open(path, "pt") as f:
            index = json.loads(f.metadata()["bench_index"])
            specs = {k: (f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()}
        return join_tree(index, specs.__getitem__)

    def slice(self, path, key, rows):
        from safetensors import safe_open
        with safe_open(path, "pt") as f:
            return f.get_slice(flat_name(key))[rows[0]:rows[1]]


class TorchSave(Peer):
    name, label, ext = "torch", "torch.save / torch.load", ".pt"
    modules = ("torch",)
    ops = ("save", "load", "load_cold", "load_mmap", "leaf", "struct", "slice")
    note = ("torch.save; torch.load(weights_only=True); leaf/slice/mmap load: torch.load(mmap=True) "
            "then a copy; structure: torch.load(map_location='meta')")

    def prepare(self, tree):
        import torch

        def conv(_p, v):
            if isinstance(v, np.ndarray):
                if v.dtype == BF16:
                    return torch.from_numpy(v.view(np.int16)).view(torch.bfloat16)
                return torch.from_numpy(v)
            return v
        from workloads import map_tree
        return map_tree(conv, tree)

    def to_numpy(self, x):
        import torch
        if isinstance(x, torch.Tensor):
            if x.dtype == torch.bfloat16:
                return x.view(torch.int16).numpy().view(BF16)
            return x.numpy()
        return x

    def save(self, tree, path):
        import torch
        torch.save(tree, path)

    def load(self, path):
        import torch
        return torch.load(path, weights_only=True)

    def load_mmap(self, path):
        import torch
        t = torch.load(path, weights_only=True, mmap=True)
        for _p, v in iter_leaves(t):
            if isinstance(v, torch.Tensor):
                touch(self.to_numpy(v))
        return t

    def leaf(self, path, key):
        import torch
        return get(torch.load(path, weights_only=True, mmap=True), key).clone()

    def struct(self, path):
        import torch
        return torch.load(path, weights_only=True, map_location="meta")

    def slice(self, path, key, rows):
        import torch
        return get(torch.load(path, weights_only=True, mmap=True), key)[rows[0]:rows[1]].clone()


class NumpyNpz(Peer):
    name, label, ext = "npz", "numpy savez (one .npz)", ".npz"
    note = "np.savez (uncompressed zip); np.load(npz)[name] reads one member whole; bf16 as uint16"

    def save(self, tree, path):
        arrays, index = split_tree(tree)
        members = {flat_name(p): as_stored(a) for p, a in arrays}
        members["__index__"] = np.frombuffer(json.dumps(index).encode(), np.uint8)
        np.savez(path, **members)

    def _index(self, z):
        return json.loads(z["__index__"].tobytes())

    def load(self, path):
        with np.load(path) as z:
            index = self._index(z)
            return join_tree(index, lambda n: as_loaded(z[n], index["arrays"][n][0]))

    def leaf(self, path, key):
        with np.load(path) as z:
            return z[flat_name(key)]

    def struct(self, path):
        with np.load(path) as z:
            index = self._index(z)
        return join_tree(index, lambda n: tuple(index["arrays"][n]))

    def slice(self, path, key, rows):
        with np.load(path) as z:  # an npz member cannot be memory-mapped: read whole, then slice
            return np.array(z[flat_name(key)][rows[0]:rows[1]])


class NumpyNpyDir(Peer):
    name, label, ext = "npy", "numpy np.save per leaf (dir, mmap)", "/"
    ops = ("save", "load", "load_mmap", "leaf", "struct", "slice")
    note = ("one .npy per array + index.json; load: np.load; leaf/slice: np.load(mmap_mode='r') "
            "then a copy; bf16 as uint16")

    def save(self, tree, path):
        os.makedirs(path)
        arrays, index = split_tree(tree)
        files = {}
        for i, (p, a) in enumerate(arrays):
            files[flat_name(p)] = f"{i:06d}.npy"
            np.save(os.path.join(path, files[flat_name(p)]), as_stored(a))
        index["files"] = files
        with open(os.path.join(path, "index.json"), "w") as f:
            json.dump(index, f)

    def _index(self, path):
        with open(os.path.join(path, "index.json")) as f:
            return json.load(f)

    def _load(self, path, mmap):
        index = self._index(path)

        def arr(n):
            a = as_loaded(np.load(os.path.join(path, index["files"][n]), mmap_mode=mmap),
                          index["arrays"][n][0])
            if mmap:
                touch(a)
            return a
        return join_tree(index, arr)

    def load(self, path):
        return self._load(path, None)

    def load_mmap(self, path):
        return self._load(path, "r")

    def leaf(self, path, key):
        index = self._index(path)
        return np.array(np.load(os.path.join(path, index["files"][flat_name(key)]), mmap_mode="r"))

    def struct(self, path):
        index = self._index(path)
        return join_tree(index, lambda n: tuple(index["arrays"][n]))

    def slice(self, path, key, rows):
        index = self._index(path)
        a = np.load(os.path.join(path, index["files"][flat_name(key)]), mmap_mode="r")
        return np.array(a[rows[0]:rows[1]])


class H5py(Peer):
    name, label, ext = "h5py", "h5py (raw, contiguous)", ".h5"
    modules = ("h5py",)
    compress = False
    note = "groups = dicts, datasets = arrays, attributes = values; bf16 as uint16"

    def save(self, tree, path):
        import h5py
        with h5py.File(path, "w", track_order=True) as f:
            self._write(f, tree)

    def _write(self, g, tree):
        for k, v in tree.items():
            if isinstance(v, dict):
                self._write(g.create_group(k, track_order=True), v)
            elif isinstance(v, np.ndarray):
                a = as_stored(v)
                kw = {}
                if self.compress and a.ndim > 0 and a.size > 0:
                    kw = dict(chunks=chunk_rows(a.shape, a.itemsize), compression="gzip",
                              compression_opts=1, shuffle=True)
                ds = g.create_dataset(k, data=a, **kw)
                if v.dtype == BF16:
                    ds.attrs["dtype"] = "bfloat16"
            else:
                g.attrs[k] = v

    @staticmethod
    def _value(x):
        if isinstance(x, bytes):
            return x.decode()
        return x.item() if isinstance(x, np.generic) else x

    def _read(self, g, data: bool):
        import h5py
        out = {}
        for k, v in g.items():
            if isinstance(v, h5py.Group):
                out[k] = self._read(v, data)
            elif data:
                out[k] = as_loaded(v[()], v.attrs.get("dtype", ""))
            else:
                out[k] = (v.attrs.get("dtype", v.dtype.name), v.shape)
        for k, x in g.attrs.items():
            out[k] = self._value(x)
        return out

    def load(self, path):
        import h5py
        with h5py.File(path, "r") as f:
            return self._read(f, True)

    def leaf(self, path, key):
        import h5py
        with h5py.File(path, "r") as f:
            ds = f[flat_name(key)]
            return as_loaded(ds[()], ds.attrs.get("dtype", ""))

    def struct(self, path):
        import h5py
        with h5py.File(path, "r") as f:
            return self._read(f, False)

    def slice(self, path, key, rows):
        import h5py
        with h5py.File(path, "r") as f:
            ds = f[flat_name(key)]
            return as_loaded(ds[rows[0]:rows[1]], ds.attrs.get("dtype", ""))


class H5pyGzip(H5py):
    name, label = "h5py-gzip", "h5py (gzip-1 + shuffle, 4 MiB chunks)"
    compress = True
    note = "chunked datasets (about 4 MiB), shuffle filter + gzip level 1; bf16 as uint16"


class ZarrZip(Peer):
    name, label, ext = "zarr", "zarr v3 (zip store, zstd-1)", ".zarr.zip"
    modules = ("zarr", "zarr.codecs", "zarr.storage")
    note = "one zip (ZipStore), an array per leaf, 4 MiB chunks, zstd level 1; index in attributes; bf16 as uint16"

    @staticmethod
    def _name(n):
        return n.replace("/", ".")

    def save(self, tree, path):
        import zarr
        import zarr.codecs
        import zarr.storage
        arrays, index = split_tree(tree)
        store = zarr.storage.ZipStore(path, mode="w")
        g = zarr.group(store=store, zarr_format=3, attributes={"bench_index": index})
        for p, a in arrays:
            s = as_stored(a)
            z = g.create_array(self._name(flat_name(p)), shape=s.shape, dtype=s.dtype,
                               chunks=chunk_rows(s.shape, s.itemsize) or None,
                               compressors=zarr.codecs.ZstdCodec(level=1))
            z[...] = s
        store.close()

    def _open(self, path):
        import zarr
        import zarr.storage
        store = zarr.storage.ZipStore(path, mode="r")
        g = zarr.open_group(store=store, mode="r")
        return store, g, g.attrs["bench_index"]

    def load(self, path):
        store, g, index = self._open(path)
        try:
            return join_tree(index, lambda n: as_loaded(g[self._name(n)][...], index["arrays"][n][0]))
        finally:
            store.close()

    def leaf(self, path, key):
        store, g, index = self._open(path)
        try:
            n = flat_name(key)
            return as_loaded(g[self._name(n)][...], index["arrays"][n][0])
        finally:
            store.close()

    def struct(self, path):
        store, _g, index = self._open(path)
        store.close()
        return join_tree(index, lambda n: tuple(index["arrays"][n]))

    def slice(self, path, key, rows):
        store, g, index = self._open(path)
        try:
            n = flat_name(key)
            return as_loaded(g[self._name(n)][rows[0]:rows[1]], index["arrays"][n][0])
        finally:
            store.close()


class Tensorstore(Peer):
    name, label, ext = "tensorstore", "tensorstore (zarr3 per leaf, raw)", "/"
    modules = ("tensorstore",)
    note = ("a zarr3 array per leaf (file kvstore, 4 MiB chunks, no compression), all writes and "
            "reads issued at once; index.json beside them; native bf16")

    def _spec(self, path, i, a=None):
        spec: Dict[str, Any] = {"driver": "zarr3",
                                "kvstore": {"driver": "file", "path": os.path.join(path, f"{i:06d}")}}
        if a is not None:
            spec["metadata"] = {"shape": list(a.shape), "data_type": a.dtype.name,
                                "chunk_grid": {"name": "regular", "configuration": {
                                    "chunk_shape": list(chunk_rows(a.shape, a.itemsize))}}}
        return spec

    def save(self, tree, path):
        import tensorstore as ts
        os.makedirs(path)
        arrays, index = split_tree(tree)
        index["ids"] = {flat_name(p): i for i, (p, _a) in enumerate(arrays)}
        with open(os.path.join(path, "index.json"), "w") as f:
            json.dump(index, f)
        ctx = ts.Context()
        opens = [ts.open(self._spec(path, i, a), create=True, context=ctx) for i, (_p, a) in enumerate(arrays)]
        writes = [o.result().write(a) for o, (_p, a) in zip(opens, arrays)]
        for w in writes:
            w.result()

    def _index(self, path):
        with open(os.path.join(path, "index.json")) as f:
            return json.load(f)

    def load(self, path):
        import tensorstore as ts
        index = self._index(path)
        ctx = ts.Context()
        names = list(index["ids"])
        opens = [ts.open(self._spec(path, index["ids"][n]), context=ctx) for n in names]
        reads = [o.result().read() for o in opens]
        got = {n: r.result() for n, r in zip(names, reads)}
        return join_tree(index, got.__getitem__)

    def leaf(self, path, key):
        import tensorstore as ts
        index = self._index(path)
        return ts.open(self._spec(path, index["ids"][flat_name(key)])).result().read().result()

    def struct(self, path):
        index = self._index(path)
        return join_tree(index, lambda n: tuple(index["arrays"][n]))

    def slice(self, path, key, rows):
        import tensorstore as ts
        index = self._index(path)
        t = ts.open(self._spec(path, index["ids"][flat_name(key)])).result()
        return t[rows[0]:rows[1]].read().result()


class FlaxMsgpack(Peer):
    name, label, ext = "flax", "flax.serialization (msgpack)", ".msgpack"
    modules = ("flax.serialization",)
    ops = ("save", "load")
    note = "msgpack_serialize / msgpack_restore of the whole state (to_bytes/from_bytes); no partial reads"

    def save(self, tree, path):
        from flax import serialization
        data = serialization.msgpack_serialize(tree)
        with open(path, "wb") as f:
            f.write(data)

    def load(self, path):
        from flax import serialization
        with open(path, "rb") as f:
            return serialization.msgpack_restore(f.read())


def _jax_env():
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import logging
    logging.getLogger("absl").setLevel(logging.ERROR)
    logging.getLogger("jax").setLevel(logging.ERROR)


class JaxPytree(Peer):
    name, label, ext = "jax", "jax pytree_serialization", "/"
    ops = ("save", "nbsave", "load", "leaf", "struct")
    note = ("jax.experimental.array_serialization.pytree_serialization (tensorstore, OCDBT); leaves "
            "must be arrays: Python scalars become 0-d arrays, strings uint8 arrays; no slice API")

    def setup(self):
        _jax_env()
        import jax
        import jax.experimental.array_serialization.pytree_serialization  # noqa: F401
        jax.devices()  # the backend starts once per process, before the clock

    def prepare(self, tree):
        _jax_env()
        import jax
        import jax.numpy as jnp
        from workloads import map_tree

        def conv(_p, v):
            if isinstance(v, np.ndarray):
                return jax.device_put(v)
            if isinstance(v, str):
                return jnp.asarray(np.frombuffer(v.encode(), np.uint8))
            return jnp.asarray(v)
        return map_tree(conv, tree)

    def to_numpy(self, x):
        return np.asarray(x) if hasattr(x, "__array__") and not isinstance(x, np.ndarray) else x

    def _ps(self):
        _jax_env()
        import jax.experimental.array_serialization.pytree_serialization as ps
        return ps

    def _sharding(self):
        import jax
        return jax.sharding.SingleDeviceSharding(jax.devices()[0])

    def save(self, tree, path):
        self._ps().save(tree, path)

    def nbsave(self, tree, path):
        fut = self._ps().nonblocking_save(tree, path)
        return fut.result

    def load(self, path):
        return self._ps().load(path, self._sharding())

    def leaf(self, path, key):
        import jax
        ps = self._ps()
        # The mask must match the structure, which only the file knows: one structure read.
        spec = ps.load_pytreedef(path)
        mask = jax.tree_util.tree_map_with_path(
            lambda p, _x: tuple(getattr(k, "key", getattr(k, "idx", None)) for k in p) == key, spec)
        return get(ps.load(path, self._sharding(), mask=mask), key)

    def struct(self, path):
        return self._ps().load_pytreedef(path)


class Orbax(Peer):
    name, label, ext = "orbax", "orbax PyTreeCheckpointer (zstd-1, default)", "/"
    ops = ("save", "nbsave", "load", "leaf", "struct")
    compression = True
    note = ("ocp.PyTreeCheckpointer (OCDBT, zarr2) of jax.Arrays; leaf: partial_restore; "
            "structure: metadata(); async: AsyncCheckpointer; no slice API")

    prepare = JaxPytree.prepare
    to_numpy = JaxPytree.to_numpy

    def setup(self):
        JaxPytree.setup(self)
        import orbax.checkpoint  # noqa: F401

    def _ocp(self):
        _jax_env()
        import orbax.checkpoint as ocp
        return ocp

    def save(self, tree, path):
        ocp = self._ocp()
        ocp.PyTreeCheckpointer(use_compression=self.compression).save(path, tree)

    def nbsave(self, tree, path):
        ocp = self._ocp()
        ck = ocp.AsyncCheckpointer(ocp.PyTreeCheckpointHandler(use_compression=self.compression))
        ck.save(path, args=ocp.args.PyTreeSave(tree))

        def wait():
            ck.wait_until_finished()
            ck.close()
        return wait

    def load(self, path):
        return self._ocp().PyTreeCheckpointer().restore(path)

    def leaf(self, path, key, shape=None, dtype=None):
        import jax
        ocp = self._ocp()
        sh = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        item: Any = jax.ShapeDtypeStruct(shape, dtype, sharding=sh)
        args: Any = ocp.ArrayRestoreArgs(sharding=sh)
        for k in reversed(key):
            item, args = {k: item}, {k: args}
        out = ocp.PyTreeCheckpointer().restore(
            path, args=ocp.args.PyTreeRestore(item=item, restore_args=args, partial_restore=True))
        return get(out, key)

    def struct(self, path):
        return self._ocp().PyTreeCheckpointer().metadata(path)


class OrbaxRaw(Orbax):
    name, label = "orbax-raw", "orbax PyTreeCheckpointer (no compression)"
    compression = False


class ZstdAnchor(Peer):
    name, label, kind = "zstd", "zstd library, level 1, 1 thread (in memory)", "anchor"
    modules = ("zstandard",)
    ops = ("save", "load")
    note = ("zstandard.ZstdCompressor(level=1) on every array's bytes in 4 MiB pieces, in memory, "
            "no file; load = decompress into new buffers")

    def pieces(self, tree):
        for _p, v in iter_leaves(tree):
            if isinstance(v, np.ndarray):
                b = v.reshape(-1).view(np.uint8)
                for o in range(0, b.size, CHUNK_BYTES):
                    yield b[o:o + CHUNK_BYTES]

    def save(self, tree, _path):
        import zstandard
        c = zstandard.ZstdCompressor(level=1)
        return [c.compress(p) for p in self.pieces(tree)]

    def load(self, frames):
        import zstandard
        d = zstandard.ZstdDecompressor()
        return [d.decompress(f) for f in frames]


class Memory(Peer):
    name, label, kind = "memory", "reference", "reference"
    ops = ("memcpy", "memcpy_warm", "read")
    note = ("memcpy: np.copyto of every array into a new np.empty (page faults included); "
            "memcpy_warm: into buffers already faulted in; read: readinto new arrays from the "
            "page-cached cache file (a warm-up read first); all 1 thread")


PEERS: Dict[str, Peer] = {p.name: p for p in (
    Jtree(), JtreeRaw(), JtreeRawUnverified(), JtreeRawCopy(), JtreeRawTorch(), JtreeJax(), JtreeOneThread(),
    JaxPytree(), Orbax(), OrbaxRaw(), FlaxMsgpack(),
    Tensorstore(), Safetensors(), TorchSave(), NumpyNpz(), NumpyNpyDir(), H5py(), H5pyGzip(),
    ZarrZip(), ZstdAnchor(), Memory())}


def output_path(workdir: str, peer: Peer, workload: str) -> str:
    p = os.path.join(workdir, f"{workload}.{peer.name}")
    return p if peer.ext == "/" else p + peer.ext


def native_leaves(peer: Peer, tree: Any) -> List[Tuple[KeyPath, Any]]:
    return [(p, peer.to_numpy(v)) for p, v in iter_leaves(tree)]


def first_array(x: Any) -> Optional[np.ndarray]:
    return x if isinstance(x, np.ndarray) else None
