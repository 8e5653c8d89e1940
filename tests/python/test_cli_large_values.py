"""The jtree command on valid files whose values are large or oddly shaped: it must answer
promptly, within bounded memory, with a clear error rather than an abort (issue 20's defects
2-4: an empty array with a huge dimension looped forever, a 64 KiB int took minutes, a leaf
larger than memory aborted). The CLI is the one the package installs (jtree/_bin/jtree)."""
import os
import resource
import subprocess

import numpy as np
import pytest

import jtree

# (Every install of the package ships it: a missing one fails these tests, it does not skip.)
CLI = os.path.join(os.path.dirname(jtree.__file__), "_bin", "jtree")


def run(*args, mem_limit=None, timeout=60):
    def limit():
        if mem_limit:
            resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limit)


def test_empty_array_with_a_huge_dimension(path):
    jtree.save({"e": np.zeros((2 ** 40, 0), np.float32)}, path)
    r = run("get", path, "e", timeout=20)
    assert r.returncode == 0, r.stderr
    assert "float32 [1099511627776, 0]" in r.stdout and "[] (no elements)" in r.stdout


def test_huge_python_int(path):
    big = 7 << (8 * 64 * 1024)  # 64 KiB of two's complement
    jtree.save({"b": big, "n": -big}, path)
    r = run("get", path, "b", timeout=20)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("0x7") and f"(an int of {big.bit_length()} bits)" in r.stdout
    r = run("get", path, "n", timeout=20)
    assert r.stdout.startswith("-0x7"), r.stdout
    r = run("ls", path, timeout=20)
    assert r.returncode == 0 and "0x" in r.stdout
    small = 12345678901234567890123456789
    jtree.save({"s": small}, path)
    assert run("get", path, "s").stdout.strip() == str(small)  # decimal when it is cheap


def test_a_leaf_larger_than_the_memory_allowed(path, tmp_path):
    n = 768 << 20  # 768 MiB of zeros: a small file
    jtree.save({"z": np.zeros(n, np.uint8), "s": "x" * n}, path)
    limit = 512 << 20  # the process may not allocate the leaf
    # Printing an array reads only what it prints.
    r = run("get", path, "z", mem_limit=limit)
    assert r.returncode == 0, r.stderr
    assert "first: 0 0 0 0 0 0 0 0 ..." in r.stdout and "805306368 elements" in r.stdout
    # -o streams it in slabs.
    out = tmp_path / "z.npy"
    r = run("get", "-q", "-o", out, path, "z", mem_limit=limit)
    assert r.returncode == 0, r.stderr
    z = np.load(out, mmap_mode="r")
    assert z.shape == (n,) and z.dtype == np.uint8 and not z[::4096].any()
    raw = tmp_path / "z.bin"
    assert run("get", "-q", "-o", raw, path, "z[1000:5000]", mem_limit=limit).returncode == 0
    assert raw.stat().st_size == 4000
    # A string must be printed whole: more than the process may allocate is a clean error.
    r = run("get", path, "s", mem_limit=limit)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "leaf s: out of memory allocating" in r.stderr and "-o FILE" in r.stderr
