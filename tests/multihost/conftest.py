"""Shared pieces of the multi-process tests: running an MPI job of the worker, the S3 server's
settings. Under JTREE_TEST_REQUIRE_ALL=1 (scripts/test_multihost.sh) a skipped test fails: CI
never passes by skipping mpirun or the S3 server."""
import os
import shutil
import subprocess
import sys
from typing import Dict, Optional, Tuple

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pyutil"))

from local_job import run_local_job  # noqa: E402, F401  (for the tests)
from require_all import pytest_runtest_makereport  # noqa: E402, F401  (the hook)


def mpirun() -> str:
    exe = shutil.which("mpirun")
    if exe is None:
        pytest.skip("mpirun is not installed (Debian: openmpi-bin)")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("mpi4py is not installed")
    return exe


def run_mpi(n: int, scenario: str, path: str, env: Optional[Dict[str, str]] = None,
            timeout: float = 300) -> Tuple[int, str]:
    """Runs mpi_worker.py SCENARIO PATH in an MPI job of n processes; (exit code, output)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = HERE + os.pathsep + e.get("PYTHONPATH", "")
    e.pop("XLA_FLAGS", None)
    e.update(env or {})
    # As root (containers, CI) OpenMPI wants --allow-run-as-root; --oversubscribe lets 4
    # processes share 2 cores.
    cmd = [mpirun(), "--allow-run-as-root", "--oversubscribe", "-np", str(n),
           sys.executable, os.path.join(HERE, "mpi_worker.py"), scenario, path]
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, check=False)
    return p.returncode, p.stdout


def assert_job_ok(n: int, rc: int, out: str) -> None:
    for r in range(n):
        assert rc == 0 and f"rank {r}: ok" in out, f"exit {rc}:\n{out[-6000:]}"


S3_ENDPOINT = os.environ.get("JTREE_TEST_S3_ENDPOINT")


def s3_env(endpoint: Optional[str] = None) -> Dict[str, str]:
    """The environment that points jtree (and boto3) at the test's S3 server."""
    return {"AWS_ENDPOINT_URL_S3": endpoint or S3_ENDPOINT or "",
            "AWS_ACCESS_KEY_ID": os.environ.get("JTREE_TEST_S3_KEY", "testkey"),
            "AWS_SECRET_ACCESS_KEY": os.environ.get("JTREE_TEST_S3_SECRET", "testsecret"),
            "AWS_REGION": "us-east-1"}
