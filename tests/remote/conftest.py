"""pytest settings of the remote tests: under JTREE_TEST_REQUIRE_ALL=1 (scripts/test_remote.sh
sets it, after starting the servers) a skipped test is a failure, so that CI never passes by
skipping a server it could not reach."""
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
