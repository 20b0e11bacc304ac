"""The e2e runs the cluster test makes, each named by what pytest collects for it.

A run's targets are given once, here: `pytest e2e e2e/test_8_...py` collects the whole suite (a directory and a
file in it are one collection), which is how the closest-pairs run once ran every case on the re-cut worker
(13 minutes, and cases written for the first shape failed there). test_e2e_runs.py collects each run.
"""

from __future__ import annotations

import subprocess

from tests.lab.conftest import BIN, REPO

SUITE: tuple[str, ...] = ("e2e", "--durations=8")
"""Every case, after the first deploy."""
PINNED_UNDER_NONE: tuple[str, ...] = ("e2e/test_1_pinned.py", "-k", "pinned_pod", "--expect-memory-policy", "None")
"""The pinned pods again, under Memory Manager None and numa-align's DaemonSet."""
CLOSEST: tuple[str, ...] = ("e2e/test_8_explain_agreement.py", "--explain-pairs", "closest")
"""explain against the kubelet on the 4-cell worker: the closest- pairs only."""


def argv(run: tuple[str, ...], *extra: str) -> list[str]:
    """pytest's command line for `run` (its targets and options) and `extra` options."""
    return [str(BIN / "pytest"), "-p", "no:cacheprovider", *run, *extra]


def run_e2e(run: tuple[str, ...], env: dict[str, str], *extra: str,
            timeout: float = 2400) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv(run, *extra), cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
