"""pytest plugin for runs on the lent GPU that a time limit may cut: each failure's traceback is appended to
$FAIL_LOG the moment its report reaches the controller, so a run stopped before its summary still names and
explains every failure it saw."""

import os


def pytest_runtest_logreport(report):
    if report.failed:
        with open(os.environ.get("FAIL_LOG", "failures.log"), "a", encoding="utf-8") as out:
            out.write(f"== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")
