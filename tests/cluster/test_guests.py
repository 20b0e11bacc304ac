"""The failed cluster test's guest history, from console logs alone (no VM: SSH to the guests fails, and
the history says so per host instead of raising)."""

from __future__ import annotations

from pathlib import Path

from tests.cluster.guests import guest_history

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
