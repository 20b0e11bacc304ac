"""The cluster test's failures show its guests' console logs, as the lab tests' do, and every run
prints how long each of its steps took."""

from __future__ import annotations

import pytest

from tests.cluster.faults import fault_table
from tests.cluster.steps import NOTES, STEPS
from tests.lab.consoles import pytest_runtest_makereport, pytest_runtest_setup  # noqa: F401  (hooks)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not STEPS:
        return
    terminalreporter.section("cluster test steps")
    for name, seconds in STEPS:
        terminalreporter.write_line(f"{seconds:8.1f} s  {name}")
    total = sum(seconds for name, seconds in STEPS if not name.startswith(" "))  # sub-steps are inside
    terminalreporter.write_line(f"{total:8.1f} s  total")
    for line in [*NOTES, *fault_table()]:
        terminalreporter.write_line(line)
