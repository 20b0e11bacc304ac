"""Each e2e run of the cluster test collects what it is meant to, and nothing else (no cluster needed:
collection only; e2e/ has its own pytest.ini, so its node ids start at the file)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.cluster.e2e_runs import CLOSEST, PINNED_UNDER_NONE, REPO, SUITE, argv


def collected(run: tuple[str, ...]) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    done = subprocess.run([*argv(run), "--collect-only", "-q"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.parametrize(("run", "only"), [(CLOSEST, "test_8_explain_agreement.py::"),
                                           (PINNED_UNDER_NONE, "test_1_pinned.py::")])
def test_a_run_of_one_file_collects_that_file_alone(run: tuple[str, ...], only: str) -> None:
    items = collected(run)
    assert items, run
    assert all(item.startswith(only) for item in items), items


def test_the_suite_collects_every_case() -> None:
    files = {item.split("::")[0] for item in collected(SUITE)}
    assert files == {p.name for p in (REPO / "e2e").glob("test_*.py")}, files
