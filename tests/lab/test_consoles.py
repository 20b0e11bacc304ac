"""A failed lab test shows its guests' console logs, even after the lab (and its state dir) was destroyed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.lab.consoles import console_tails, keep_consoles, kept_dir

REPO = Path(__file__).resolve().parents[2]


def state_with_console(root: Path, lines: int = 3) -> Path:
    state = root / "state"
    (state / "console").mkdir(parents=True)
    (state / "console" / "cloudy.log").write_text("".join(f"boot line {n}\r\n" for n in range(lines)))
    return state


def test_logs_are_kept_beside_a_state_dir_that_is_removed(tmp_path):
    state = state_with_console(tmp_path, lines=100)
    keep_consoles(state)
    (state / "console" / "cloudy.log").unlink()
    (state / "console").rmdir()
    state.rmdir()
    tails = console_tails([state], lines=5)
    assert str(kept_dir(state) / "cloudy.log") in tails
    assert tails.splitlines()[1:] == [f"boot line {n}" for n in range(95, 100)]


def test_a_failing_test_reports_the_consoles_of_the_lab_it_made(tmp_path):
    """Run a failing test that 'makes' a lab and destroys it in its finally, as the lab tests do."""
    (tmp_path / "conftest.py").write_text(
        "from tests.lab.consoles import pytest_runtest_makereport, pytest_runtest_setup  # noqa: F401\n")
    (tmp_path / "test_inner.py").write_text(textwrap.dedent("""
        import shutil
        from tests.lab.consoles import keep_consoles, note_lab

        def test_guest_never_answers(tmp_path):
            state = tmp_path / "state"
            (state / "console").mkdir(parents=True)
            (state / "console" / "cloudy.log").write_text("cloud-init: waiting for the NoCloud seed\\n")
            note_lab(state)
            try:
                assert False, "SSH not ready"
            finally:
                keep_consoles(state)
                shutil.rmtree(state)

        def test_passing_tests_show_nothing(tmp_path):
            assert True
        """))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "guest console logs" in run.stdout
    assert "cloud-init: waiting for the NoCloud seed" in run.stdout
    assert run.stdout.count("guest console logs") == 1
