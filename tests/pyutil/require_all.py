"""The pytest hook of the suites that start real servers or processes: under
JTREE_TEST_REQUIRE_ALL=1 (set by the scripts/test_*.sh that start them) a skipped test is a
failure, so that CI never passes by skipping what it could not reach. A conftest imports it:
``from require_all import pytest_runtest_makereport``."""
import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("JTREE_TEST_REQUIRE_ALL") == "1":
        report.outcome = "failed"
        report.longrepr = (f"!!! {item.nodeid} was skipped ({report.longrepr}), and "
                           "JTREE_TEST_REQUIRE_ALL=1 forbids skipping")
