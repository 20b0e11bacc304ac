"""The cluster test's failures show its guests' console logs, as the lab tests' do."""

from tests.lab.consoles import pytest_runtest_makereport, pytest_runtest_setup  # noqa: F401  (hooks)
