"""Shared fixtures and helpers of the jtree Python tests.

JAX needs its CPU devices before it is imported: XLA_FLAGS asks for 8 (scripts/test_python.sh
sets it too). A test needing a package that is not installed skips with a loud reason; with
JTREE_TEST_REQUIRE_ALL=1 (set by scripts/test_python.sh) it fails instead, so that CI never
passes by skipping.
"""
import collections
import importlib
import math
import os
import sys

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyutil"))
from local_job import run_local_job  # noqa: E402, F401  (for the multi-process tests)


_FUZZ_HARNESS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "fuzz", "python", "fuzz_load.py")


def fuzz_harness():
    """fuzz/python/fuzz_load.py as a module, imported as its --replay mode does (without
    atheris): its driver (test_one_input) and its hash repair (rehash)."""
    import importlib.util  # noqa: PLC0415

    argv, sys.argv = sys.argv, [_FUZZ_HARNESS, "--replay"]
    try:
        spec = importlib.util.spec_from_file_location("jtree_fuzz_load", _FUZZ_HARNESS)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        sys.argv = argv
    return mod


def require(module: str):
    """Imports a module the test needs, or skips (fails under JTREE_TEST_REQUIRE_ALL=1)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        msg = f"!!! SKIPPED: this test needs the '{module}' package, which is not installed ({e})"
        if os.environ.get("JTREE_TEST_REQUIRE_ALL") == "1":
            pytest.fail(msg + " -- and JTREE_TEST_REQUIRE_ALL=1 forbids skipping")
        print(msg)
        pytest.skip(msg)


@pytest.fixture
def path(tmp_path):
    """A fresh .jtree path in a temporary directory."""
    return str(tmp_path / "t.jtree")


@pytest.fixture
def jax():
    return require("jax")


@pytest.fixture
def torch():
    return require("torch")


@pytest.fixture
def ml_dtypes():
    return require("ml_dtypes")


def assert_same(a, b, where="root"):
    """Deep equality with exact types: containers of the same class (namedtuples by name and
    fields), arrays with the same dtype, shape and bits, scalars of the same type and value
    (NaN equal to NaN)."""
    if isinstance(a, np.ndarray) or isinstance(a, np.generic):
        assert type(b) is type(a), f"{where}: {type(b)} != {type(a)}"
        assert a.dtype == b.dtype, f"{where}: dtype {b.dtype} != {a.dtype}"
        assert np.shape(a) == np.shape(b), f"{where}: shape {np.shape(b)} != {np.shape(a)}"
        if a.dtype.name in ("int4", "uint4"):
            # ml_dtypes reads only the low nibble; its arithmetic can leave a saved int4 byte
            # sign-extended (-1 as 0xFF), while loads hold ml_dtypes' bytes (0x0F): compare the
            # nibbles.
            a = np.ascontiguousarray(a).view(np.uint8) & 0x0F
            b = np.ascontiguousarray(b).view(np.uint8) & 0x0F
        ab = np.ascontiguousarray(a).view(np.uint8) if np.ndim(a) else np.asarray(a).tobytes()
        bb = np.ascontiguousarray(b).view(np.uint8) if np.ndim(b) else np.asarray(b).tobytes()
        assert np.array_equal(ab, bb), f"{where}: values differ"
        return
    if isinstance(a, tuple) and hasattr(type(a), "_fields"):
        assert isinstance(b, tuple) and hasattr(type(b), "_fields"), f"{where}: not a namedtuple"
        assert type(a).__name__ == type(b).__name__ and a._fields == b._fields, where
        for f, x, y in zip(a._fields, a, b):
            assert_same(x, y, f"{where}/{f}")
        return
    assert type(a) is type(b), f"{where}: {type(b).__name__} != {type(a).__name__}"
    if isinstance(a, (dict, collections.OrderedDict)):
        assert list(a.keys()) == list(b.keys()), f"{where}: keys {list(b)} != {list(a)}"
        for k in a:
            assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{where}: length {len(b)} != {len(a)}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}/{i}")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    elif isinstance(a, complex):
        assert (a.real == b.real or (math.isnan(a.real) and math.isnan(b.real))) and \
               (a.imag == b.imag or (math.isnan(a.imag) and math.isnan(b.imag))), where
    else:
        assert a == b, f"{where}: {b!r} != {a!r}"
