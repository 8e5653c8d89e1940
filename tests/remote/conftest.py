"""pytest settings of the remote tests: under JTREE_TEST_REQUIRE_ALL=1 (scripts/test_remote.sh
sets it, after starting the servers) a skipped test is a failure, so that CI never passes by
skipping a server it could not reach (tests/pyutil/require_all.py)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyutil"))

from require_all import pytest_runtest_makereport  # noqa: E402, F401  (the hook)
