"""Guest console logs in a failed lab test's output.

A lab's console logs live in its state dir, which `numalab lab destroy` removes in the test's own
`finally`, before pytest reports the failure: the one file that says why a guest did not come up was
gone. Labs made by a test are noted here; destroy copies their logs beside the state dir first; a
failed test that made a lab (or used the session lab) gets the last lines of each guest's log as a
report section.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

TAIL_LINES = 60
SECTION = "guest console logs"

_made_in_test: list[Path] = []
_session_labs: list[Path] = []


def note_lab(state_dir: Path, *, session: bool = False) -> None:
    """A lab whose consoles a failure of the current test (or of any test using it) should show."""
    (_session_labs if session else _made_in_test).append(state_dir)


def kept_dir(state_dir: Path) -> Path:
    return state_dir.with_name(f"{state_dir.name}-consoles")


def keep_consoles(state_dir: Path) -> None:
    """Copy the console logs out of a state dir that is about to be removed."""
    logs = state_dir / "console"
    if logs.is_dir():
        shutil.copytree(logs, kept_dir(state_dir), dirs_exist_ok=True)


def console_logs(state_dir: Path) -> Iterator[Path]:
    for where in (state_dir / "console", kept_dir(state_dir)):
        if where.is_dir():
            yield from sorted(where.glob("*.log"))
            return


def console_tails(state_dirs: list[Path], lines: int = TAIL_LINES) -> str:
    """The last lines of every guest's console log of these labs, guest by guest."""
    parts = []
    for state_dir in state_dirs:
        for log in console_logs(state_dir):
            text = log.read_text(errors="replace").replace("\r", "")
            tail = "\n".join(text.splitlines()[-lines:])
            parts.append(f"--- {log} (last {lines} lines)\n{tail}")
    return "\n".join(parts)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _made_in_test.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    labs = list(_made_in_test) + (list(_session_labs) if "kvm_lab" in getattr(item, "fixturenames", ()) else [])
    text = console_tails(list(dict.fromkeys(labs)))
    if text:
        report.sections.append((SECTION, text))
