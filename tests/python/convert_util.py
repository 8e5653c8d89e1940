"""Helpers of the jtree convert tests: files written by the peers' own libraries, comparisons
bit for bit, and peak memory of a conversion in a fresh process."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np

import jtree

# Where the jtree under test is imported from (the installed package; the checkout's python/
# has no native module of its own): child processes import that one.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(jtree.__file__)))


def raw(a):
    """An array's bytes (dtype and shape compared separately)."""
    a = np.ascontiguousarray(np.asarray(a))
    return a.reshape(-1).view(np.uint8).tobytes()


def torch_raw(t):
    """A torch tensor's bytes, whatever its dtype (bf16 and float8 have no NumPy view)."""
    import torch  # noqa: PLC0415

    t = t.detach().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def assert_tensor_equal(arr, t, name=""):
    """A NumPy array from jtree equals a torch tensor: dtype name, shape and bits."""
    assert str(arr.dtype) == str(t.dtype).rsplit(".", 1)[-1], (name, arr.dtype, t.dtype)
    assert tuple(arr.shape) == tuple(t.shape), (name, arr.shape, t.shape)
    assert raw(arr) == torch_raw(t), name


def write_hf_sharded(directory, tensors, n_shards, metadata=None):
    """A Hugging Face sharded checkpoint as transformers writes one (save_pretrained with a
    max_shard_size): model-0000i-of-0000n.safetensors shards written by safetensors.torch's
    save_file with {"format": "pt"}, and model.safetensors.index.json mapping every tensor
    (sorted by name) to its shard, with metadata.total_size."""
    from safetensors.torch import save_file  # noqa: PLC0415

    os.makedirs(directory, exist_ok=True)
    names = list(tensors)
    per = -(-len(names) // n_shards)
    weight_map = {}
    total = 0
    for i in range(n_shards):
        shard = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {k: tensors[k].contiguous() for k in names[i * per:(i + 1) * per]}
        save_file(part, os.path.join(directory, shard), metadata={"format": "pt"})
        for k, t in part.items():
            weight_map[k] = shard
            total += t.numel() * t.element_size()
    index = {"metadata": {"total_size": total, **(metadata or {})},
             "weight_map": dict(sorted(weight_map.items()))}
    path = os.path.join(directory, "model.safetensors.index.json")
    with open(path, "w") as f:
        json.dump(index, f, indent=2, sort_keys=True)
    return path


def peak_rss_growth(code, env_extra=None, timeout=300):
    """Runs ``code`` (which defines ``run()``) in a fresh Python; returns (peak RSS before
    run(), peak RSS after) in bytes. The peak is VmHWM of /proc/self/status: ru_maxrss would
    do, but Linux carries it over exec from the forking parent (pytest's hundreds of MiB would
    hide the growth); where /proc is missing, ru_maxrss (KiB on Linux) stands in."""
    script = textwrap.dedent("""
        import resource, sys, gc
        sys.path.insert(0, {python!r})
        import numpy, jtree

        def peak():
            try:
                with open("/proc/self/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            return int(line.split()[1]) * 1024
            except OSError:
                pass
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        {code}
        gc.collect()
        before = peak()
        run()
        after = peak()
        print(before, after)
    """).format(python=PACKAGE_ROOT, code=textwrap.dedent(code))
    env = dict(os.environ)
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=timeout, env=env)
    assert out.returncode == 0, out.stderr
    before, after = map(int, out.stdout.split()[-2:])
    return before, after
