"""The failed cluster test's guest history, from console logs alone (no VM: SSH to the guests fails, and
the history says so per host instead of raising); the test's commands over one kept connection per guest."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.cluster.guests import guest_history, ssh

CONSOLE = """\
[   92.0] numalab-firstboot[319]: numalab-firstboot: worker-3 is 10.77.2.13/24 on eth0
[ 1346.6] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI
[ 1346.6] RIP: 0010:enqueue_entity+0x11f/0x500
[ 1346.7] Kernel panic - not syncing: Fatal exception in interrupt
[   57.4] numalab-firstboot[321]: numalab-firstboot: worker-3 is 10.77.2.13/24 on eth0
"""


def test_history_counts_boots_and_lists_kernel_trouble_from_the_console_log(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (state / "console").mkdir(parents=True)
    (state / "console" / "worker-3.log").write_text(CONSOLE)
    (state / "console" / "server.log").write_text(CONSOLE.splitlines()[0].replace("worker-3", "server") + "\n")
    history = guest_history(state, ("worker-3",))
    assert "--- worker-3: booted 2 time(s); kernel trouble: 3 line(s)" in history
    assert "Oops: int3" in history and "Kernel panic - not syncing" in history
    assert "--- server: booted 1 time(s); kernel trouble: 0 line(s)" in history
    assert "--- server (ssh rc 255)" in history and "--- worker-3 (ssh rc 255)" in history  # no ssh_config here


def test_commands_go_through_one_kept_connection_that_a_reset_guest_ends(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    ran: list[list[str]] = []
    monkeypatch.setattr(subprocess, "run", lambda argv, **_: ran.append(argv) or subprocess.CompletedProcess(argv, 0))
    ssh(tmp_path, "worker-1", "true")
    ssh(tmp_path, "worker-3", "true")
    options = [dict(argv[i + 1].split("=", 1) for i, arg in enumerate(argv) if arg == "-o") for argv in ran]
    assert options[0] == options[1]
    assert options[0]["ControlMaster"] == "auto" and options[0]["ControlPersist"] == "60"
    path = options[0]["ControlPath"]
    assert path.endswith("/%C") and Path(path).parent.is_dir()
    assert len(path.replace("%C", "0" * 40).encode()) < 104  # a socket's path: %C is 40 hex digits
    assert int(options[0]["ServerAliveInterval"]) * int(options[0]["ServerAliveCountMax"]) <= 15
    assert ran[0][-2:] == ["worker-1", "true"] and ran[0][:3] == ["ssh", "-F", str(tmp_path / "ssh_config")]
