"""The cluster test's deploy runs are timed line by line: phases and the slowest operations come out of
pyinfra's own output, and the whole output is still what the assertions read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.timed_run import Timed, run_timed

FAKE_PYINFRA = r"""
import sys, time
def say(line, pause=0.0):
    print(line, flush=True)
    time.sleep(pause)
say("--> Loading inventory...")
say("--> Connecting to hosts...", 0.3)
say("--> Preparing operation files...", 0.4)
say("--> Beginning operation run...")
say("\x1b[34m--> Starting operation:\x1b[0m \x1b[1mbase | Set hostname\x1b[0m ", 0.05)
print("    [worker-1] No changes", file=sys.stderr, flush=True)
say("--> Starting operation: numa_align | Wait for the DaemonSet", 0.5)
say("--> Starting serial operation: policy_reset | Drain worker-1", 0.2)
say("--> Results:")
say("    Grand total  12  -  0  0")
"""


def fake_run(tmp_path: Path, script: str = FAKE_PYINFRA, timeout: float = 30) -> Timed:
    source = tmp_path / "fake_pyinfra.py"
    source.write_text(script)
    return run_timed([sys.executable, str(source)], {"PATH": "/usr/bin:/bin"}, tmp_path, timeout,
                     tmp_path / "deploy.log")


def test_phases_and_slowest_operations_come_from_the_output(tmp_path: Path) -> None:
    timed = fake_run(tmp_path)
    phases = dict(timed.phases())
    assert list(phases) == ["connect (lab up)", "plan (facts)", "operations", "results"]
    # Each figure is the gap between two lines' arrivals here. A line the loaded host delivers late shortens the
    # gap after it (r-c: 0.3990 s for the fake's 0.4 s sleep), so each is asked for half of its sleep: measured,
    # not zero, and not a timed assertion on this machine's speed.
    assert phases["connect (lab up)"] >= 0.15 and phases["plan (facts)"] >= 0.2
    slowest = timed.slowest_operations(2)
    assert [name for name, _ in slowest] == ["numa_align | Wait for the DaemonSet", "policy_reset | Drain worker-1"]
    assert slowest[0][1] >= 0.25  # the fake sleeps 0.5 s there


def test_the_output_is_whole_colourless_with_stderr_and_logged_with_times(tmp_path: Path) -> None:
    timed = fake_run(tmp_path)
    out = timed.completed.stdout
    assert timed.completed.returncode == 0 and timed.completed.stderr == ""
    assert "[worker-1] No changes" in out and "--> Starting operation: base | Set hostname" in out
    assert "\x1b" not in out and out.rstrip().endswith("Grand total  12  -  0  0")
    logged = (tmp_path / "deploy.log").read_text().splitlines()
    assert len(logged) == len(out.splitlines())
    assert float(logged[-1].split()[0]) >= 1.0  # each line's second since the start (the fake sleeps 1.45 s in all)


def test_a_run_past_its_timeout_is_killed_and_raises_with_what_it_said(tmp_path: Path) -> None:
    script = "import time\nprint('--> Connecting to hosts...', flush=True)\ntime.sleep(600)\n"
    # The timeout leaves the interpreter room to start and print: in CI at ddee7d5, niced beside the cluster lab,
    # it had printed nothing within 1 s. Ten seconds is still far below the fake's sleep.
    with pytest.raises(subprocess.TimeoutExpired) as raised:
        fake_run(tmp_path, script, timeout=10)
    assert "Connecting to hosts" in raised.value.output
    assert "Connecting to hosts" in (tmp_path / "deploy.log").read_text()


def test_a_failed_run_keeps_its_exit_code(tmp_path: Path) -> None:
    timed = fake_run(tmp_path, "import sys\nprint('--> Loading inventory...')\nsys.exit(1)\n")
    assert timed.completed.returncode == 1 and timed.phases() == [] and timed.slowest_operations() == []
