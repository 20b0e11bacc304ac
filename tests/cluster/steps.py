"""How long each step of the cluster test took: the CI budget is spent there, so every run prints it."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STEPS: list[tuple[str, float]] = []
NOTES: list[str] = []
"""Figures a run should show whatever its outcome (the side-by-side schedulers' counts): printed after the steps."""


_DEPTH = [0]


@contextmanager
def step(name: str) -> Iterator[None]:
    """Time one step of the cluster test; a step that raised is listed too, marked. A step inside another is
    listed under it, indented (the total counts the outer one)."""
    started = time.monotonic()
    index = len(STEPS)  # its line goes before what was noted during it (a deploy's phases)
    indent, failed = "  " * _DEPTH[0], True
    _DEPTH[0] += 1
    try:
        yield
        failed = False
    finally:
        _DEPTH[0] -= 1
        STEPS.insert(index, (indent + name + (" (failed)" if failed else ""), time.monotonic() - started))


DURATION = re.compile(r"^\s*(\d+\.\d+)s\s+(call|setup|teardown)\s+(\S+)")


def note_durations(prefix: str, pytest_output: str) -> None:
    """List the slowest tests of a nested pytest run (its --durations lines) under the step that ran it."""
    for line in pytest_output.splitlines():
        if found := DURATION.match(line):
            STEPS.append((f"  {prefix} {found.group(2)} {found.group(3)}", float(found.group(1))))


def note_rows(pytest_output: str, case_prefix: str) -> None:
    """Keep the e2e table's rows of a case (its CASE column starts with `case_prefix`) for the summary."""
    NOTES.extend(line.strip() for line in pytest_output.splitlines()
                 if len(line.split()) > 3 and line.split()[2].startswith(case_prefix))


def note_outages(pytest_output: str) -> None:
    """Keep the e2e run's line on API server outages it waited out (e2e/api_outages.py), if it had any."""
    NOTES.extend(line.strip() for line in pytest_output.splitlines() if line.startswith("e2e: the API server "))


def note_deploy(label: str, phases: list[tuple[str, float]], slowest: list[tuple[str, float]]) -> None:
    """A deploy run's phases and slowest operations (tests.cluster.timed_run), under the step that ran it."""
    STEPS.extend((f"  {label}: {phase}", seconds) for phase, seconds in phases)
    STEPS.extend((f"    {label} op: {name}", seconds) for name, seconds in slowest)


def failure_excerpt(output: str, limit: int = 8000) -> str:
    """An e2e run's output for an assertion message: pytest's own FAILED/ERROR summary lines (a failure that
    wrote no FAIL row, a fixture's error, is named only there), its table's FAIL rows and whole-cluster rows
    (worker `*`, which sort first and were cut from the tail alone: case 9's two sides), then the last `limit`
    chars. CI shows an assertion's head, so what failed comes first."""
    lines = output.splitlines()
    summary = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    rows = [line for line in lines
            if len(line.split()) > 3 and (line.split()[3] == "FAIL" or line.split()[:2] == ["*", "*"])]
    head = ("pytest's failures:\n" + "\n".join(summary) + "\n" if summary else "") \
        + ("FAIL and whole-cluster rows:\n" + "\n".join(rows) + "\n" if rows else "")
    return head + "...\n" + output[-limit:] if head else output[-limit:]


FIRST_DEPLOY_DONE = "NUMALAB_FIRST_DEPLOY_DONE"
"""The file `make test`'s runner (scripts/test-side-by-side) waits for before it starts the other tests."""


def first_deploy_done() -> None:
    """Say the first deploy is over (done or failed): the runner starts the other tests beside what follows."""
    if path := os.environ.get(FIRST_DEPLOY_DONE):
        Path(path).touch()
